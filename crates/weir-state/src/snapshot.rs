//! Snapshots: one operator subtask's committed state at an epoch, written as Parquet segments
//! to an object store off the hot path.
//!
//! At the barrier the task calls [`SegmentStore::begin_snapshot`]: it opens a
//! [`StateReadView`] (a redb MVCC read transaction, microseconds) and returns a
//! [`PendingSnapshot`]. The task then goes on processing and committing; the view does not see
//! those commits and does not block them. [`PendingSnapshot::write`] encodes the segments on a
//! blocking thread (`spawn_blocking`) and uploads each with one `put` (atomic per object) as it
//! is produced, through a channel of two segments, so encoding and upload overlap and memory
//! stays bounded by a few segments.

use crate::backend::StateBackend;
use crate::error::{StateError, StateResult};
use crate::segment::{SegmentDescriptor, SegmentEncoder, SegmentHeader};
use crate::view::StateReadView;
use bytes::Bytes;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use std::collections::HashMap;
use std::sync::Arc;
use weir_api::{Epoch, JobId, OperatorId, StateShardId, StateSpec, SubtaskIndex};
use weir_plan::ShardAssignment;

/// An object store and the base path under which segment paths live.
///
/// Segment paths in [`SegmentDescriptor`]s are relative to `base`; the object written is
/// `base/` + that path.
#[derive(Debug, Clone)]
pub struct SegmentStore {
    store: Arc<dyn ObjectStore>,
    base: ObjectPath,
}

impl SegmentStore {
    /// A store writing and reading segments under `base` (the empty path for the root).
    pub fn new(store: Arc<dyn ObjectStore>, base: ObjectPath) -> Self {
        Self { store, base }
    }

    /// The underlying object store.
    pub fn object_store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// The full object path of a segment path relative to the base.
    pub(crate) fn location(&self, relative: &str) -> StateResult<ObjectPath> {
        let relative = ObjectPath::parse(relative).map_err(|e| StateError::Segment {
            path: relative.to_owned(),
            message: format!("not a valid object path: {e}"),
        })?;
        Ok(ObjectPath::from_iter(
            self.base.parts().chain(relative.parts()),
        ))
    }

    /// Takes the point-in-time view of `backend` for `scope`: call it at the barrier, after the
    /// journal of the acknowledged batches was committed. Cheap and synchronous; the returned
    /// [`PendingSnapshot`] does the work.
    ///
    /// # Errors
    ///
    /// [`StateError::Storage`] when redb cannot start the read transaction.
    pub fn begin_snapshot(
        &self,
        backend: &StateBackend,
        scope: SnapshotScope,
    ) -> StateResult<PendingSnapshot> {
        let view = backend.read_view()?;
        Ok(PendingSnapshot {
            store: self.clone(),
            view,
            now_ms: backend.now_ms(),
            scope,
        })
    }

    pub(crate) async fn put(&self, relative: &ObjectPath, bytes: Bytes) -> StateResult<()> {
        let location = ObjectPath::from_iter(self.base.parts().chain(relative.parts()));
        self.store
            .put(&location, PutPayload::from_bytes(bytes))
            .await
            .map(|_| ())
            .map_err(|source| StateError::ObjectStore {
                context: "writing segment".to_owned(),
                path: location.to_string(),
                source: Box::new(source),
            })
    }
}

/// What one snapshot covers: one operator of one subtask at one epoch.
#[derive(Debug, Clone)]
pub struct SnapshotScope {
    /// The checkpoint namespace (by default derived from job and pipeline; docs/checkpoints.md).
    pub namespace: String,
    /// The epoch being checkpointed.
    pub epoch: Epoch,
    /// The job.
    pub job: JobId,
    /// The operator whose state is written.
    pub operator: OperatorId,
    /// The subtask writing it.
    pub subtask: SubtaskIndex,
    /// Shards and owners of the operator's vertex in the running plan.
    pub shards: ShardAssignment,
}

impl SnapshotScope {
    /// The shards `subtask` owns in `shards`, in order.
    pub fn owned_shards(&self) -> Vec<StateShardId> {
        owned_shards(&self.shards, self.subtask)
    }
}

pub(crate) fn owned_shards(shards: &ShardAssignment, subtask: SubtaskIndex) -> Vec<StateShardId> {
    shards
        .owners
        .iter()
        .filter(|r| r.subtask == subtask.0)
        .flat_map(|r| (r.first_shard..=r.last_shard).map(StateShardId))
        .collect()
}

/// A snapshot whose view is taken and whose segments are not written yet.
///
/// It holds a redb read transaction: write it promptly, or drop it to abandon the snapshot
/// (redb cannot reuse pages a live view references).
#[derive(Debug)]
pub struct PendingSnapshot {
    store: SegmentStore,
    view: StateReadView,
    now_ms: u64,
    scope: SnapshotScope,
}

impl PendingSnapshot {
    /// Writes one segment per (shard, state) that holds live entries, and returns their
    /// descriptors in (shard, state) order. Entries dead at the time the view was taken are
    /// left out; a (shard, state) with no live entries writes no segment.
    ///
    /// # Errors
    ///
    /// [`StateError::ObjectStore`] when an upload fails, [`StateError::Segment`] when Parquet
    /// encoding fails, [`StateError::Corrupt`] for an entry of an unregistered state or of a
    /// shard this subtask does not own (a routing bug: the entry would otherwise be lost on
    /// restore), [`StateError::Storage`] when redb fails. Segments uploaded before the error
    /// stay behind as orphans, unreferenced by any manifest (the manifest is the commit point).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future stops the uploads; the encoder thread stops at its next segment.
    pub async fn write(self) -> StateResult<Vec<SegmentDescriptor>> {
        let PendingSnapshot {
            store,
            view,
            now_ms,
            scope,
        } = self;
        let (tx, mut rx) = tokio::sync::mpsc::channel::<(ObjectPath, Bytes, SegmentDescriptor)>(2);
        let encoder = tokio::task::spawn_blocking(move || encode_all(&view, now_ms, &scope, &tx));
        let mut written = Vec::new();
        while let Some((path, bytes, descriptor)) = rx.recv().await {
            store.put(&path, bytes).await?;
            written.push(descriptor);
        }
        encoder.await.map_err(|e| StateError::Background {
            context: "encoding state segments".to_owned(),
            message: e.to_string(),
        })??;
        Ok(written)
    }
}

type Sender = tokio::sync::mpsc::Sender<(ObjectPath, Bytes, SegmentDescriptor)>;

/// Scans the operator's entries once, in key order, cutting a segment at every (shard, state)
/// change. Runs on a blocking thread.
fn encode_all(
    view: &StateReadView,
    now_ms: u64,
    scope: &SnapshotScope,
    tx: &Sender,
) -> StateResult<()> {
    let specs: HashMap<String, StateSpec> = view
        .registered_states(&scope.job, &scope.operator)?
        .into_iter()
        .map(|s| (s.name.clone(), s))
        .collect();
    let owners = scope.shards.owner_table();
    let mut current: Option<SegmentEncoder> = None;
    for entry in view.scan_operator(&scope.job, &scope.operator)? {
        let entry = entry?;
        if entry.is_expired(now_ms) {
            continue;
        }
        let parts = entry.parts()?;
        let same = current.as_ref().is_some_and(|c| {
            c.header().shard == parts.shard && c.header().spec.name == parts.state
        });
        if !same {
            if let Some(done) = current.take() {
                send(tx, done)?;
            }
            if owners.get(parts.shard.0 as usize) != Some(&scope.subtask.0) {
                return Err(StateError::corrupt(format!(
                    "subtask {} of operator `{}` holds state `{}` of shard {}, which it does not \
                     own under stateShardCount {}",
                    scope.subtask,
                    scope.operator,
                    parts.state,
                    parts.shard.0,
                    scope.shards.state_shard_count
                )));
            }
            let spec = specs.get(parts.state).cloned().ok_or_else(|| {
                StateError::corrupt(format!(
                    "operator `{}` holds entries of unregistered state `{}`",
                    scope.operator, parts.state
                ))
            })?;
            current = Some(SegmentEncoder::try_new(SegmentHeader {
                namespace: scope.namespace.clone(),
                epoch: scope.epoch,
                job: scope.job.clone(),
                operator: scope.operator.clone(),
                subtask: scope.subtask,
                shard: parts.shard,
                state_shard_count: scope.shards.state_shard_count,
                spec,
            })?);
        }
        if let Some(encoder) = current.as_mut() {
            encoder.push(&parts, &entry.payload, entry.expiry_ms)?;
        }
    }
    if let Some(done) = current.take() {
        send(tx, done)?;
    }
    Ok(())
}

fn send(tx: &Sender, encoder: SegmentEncoder) -> StateResult<()> {
    // A closed channel means the uploader failed (it reports its own error) or was dropped.
    tx.blocking_send(encoder.finish()?)
        .map_err(|_| StateError::Background {
            context: "encoding state segments".to_owned(),
            message: "the uploader stopped".to_owned(),
        })
}
