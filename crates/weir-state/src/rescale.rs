//! Rescale by shards: segments written at one parallelism, restored at another.
//!
//! With the same `stateShardCount`, a shard's segments move whole to the shard's new owner
//! ([`assign_segments`]); no row is read or re-keyed. A change of `stateShardCount` is refused
//! ([`StateError::ShardCountChanged`]) unless the caller asks for the migration explicitly
//! with [`SegmentStore::restore_rehashed`], which re-keys row by row.

use crate::backend::StateBackend;
use crate::error::{StateError, StateResult};
use crate::layout::EntryKey;
use crate::restore::{
    Registrations, RestoreOptions, RestoreReport, check_segments, load_entries, refuse_images,
};
use crate::segment::{DecodedSegment, SegmentDescriptor, check_disjoint};
use crate::snapshot::SegmentStore;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use weir_api::{JobId, OperatorId, StateShardId, StateSpec, SubtaskIndex};
use weir_plan::ShardAssignment;

/// The segments each subtask of `target` restores, indexed by subtask: exactly the segments of
/// the shards it owns, whatever parallelism wrote them. A per-shard segment goes to the owner of
/// its shard; an image segment ([`SegmentDescriptor::is_image`]) goes to every subtask that owns
/// at least one shard of its range, once, and each keeps the rows of its own shards when it
/// reads the segment ([`SegmentStore::read_image`]).
///
/// # Errors
///
/// [`StateError::ShardCountChanged`] (naming the operator and both counts) when a segment was
/// written with another `stateShardCount` than `target`'s; [`StateError::Segment`] for a shard
/// out of range, an empty shard range, a shard no subtask owns, or two segments of one
/// (operator, state) covering a common shard (for per-shard segments: two of one shard).
pub fn assign_segments(
    segments: &[SegmentDescriptor],
    target: &ShardAssignment,
) -> StateResult<Vec<Vec<SegmentDescriptor>>> {
    let owners = target.owner_table();
    let parallelism = target
        .owners
        .iter()
        .map(|r| r.subtask + 1)
        .max()
        .unwrap_or(0);
    for d in segments {
        if d.state_shard_count != target.state_shard_count {
            return Err(StateError::ShardCountChanged {
                operator: d.operator.to_string(),
                stored: d.state_shard_count,
                requested: target.state_shard_count,
            });
        }
    }
    check_disjoint(segments)?;
    let mut out = vec![Vec::new(); parallelism as usize];
    for d in segments {
        let range = d.shard_range();
        // A range beyond the count is refused before it is walked.
        let targets: BTreeSet<u32> = owners
            .get(*range.start() as usize..=*range.end() as usize)
            .map(|o| o.iter().copied().collect())
            .unwrap_or_default();
        let mut assigned = false;
        for owner in targets {
            if let Some(mine) = out.get_mut(owner as usize) {
                mine.push(d.clone());
                assigned = true;
            }
        }
        if !assigned {
            return Err(StateError::Segment {
                path: d.path.clone(),
                message: if d.is_image() {
                    format!(
                        "shards {} have no owner among {} shards",
                        d.shards_shown(),
                        target.state_shard_count
                    )
                } else {
                    format!(
                        "shard {} has no owner among {} shards",
                        d.shard.0, target.state_shard_count
                    )
                },
            });
        }
    }
    Ok(out)
}

/// The stable key hash of an operator's key bytes, for a shard-count migration.
///
/// State keys are the operator's own bytes; only the operator knows how they encode the key
/// columns, so the caller supplies the hash (typically: decode the key columns, then
/// `weir_plan::key_hash::hash_keys`). It must be the hash the running job routes rows with.
pub type KeyHashFn = dyn Fn(&[u8]) -> Result<u64, String> + Send + Sync;

impl SegmentStore {
    /// The explicit shard-count migration: restores into `backend` the entries of `segments`
    /// (written with any `stateShardCount`) whose key now falls, under `target`, into a shard
    /// `subtask` owns. Every segment is read (and its checksum verified) by every subtask, and
    /// every row is re-keyed: `shard = key_hash(key) mod target.state_shard_count`. The
    /// subtask's share of the state is held in memory while regrouping.
    ///
    /// # Errors
    ///
    /// As [`restore`](Self::restore) (image segments included: they are refused);
    /// [`StateError::Migration`] when `key_hash` fails on a key (naming the operator and state).
    pub async fn restore_rehashed(
        &self,
        backend: &StateBackend,
        segments: &[SegmentDescriptor],
        target: &ShardAssignment,
        subtask: SubtaskIndex,
        key_hash: Arc<KeyHashFn>,
        options: &RestoreOptions,
    ) -> StateResult<RestoreReport> {
        refuse_images(segments)?;
        // Shard counts may differ here; that is the point of the migration.
        let mut uniform: Vec<SegmentDescriptor> = segments.to_vec();
        for d in &mut uniform {
            d.state_shard_count = target.state_shard_count;
        }
        check_segments(backend, &uniform, options)?;
        let owners = target.owner_table();
        let mut groups: BTreeMap<(JobId, OperatorId, StateShardId, String), Group> =
            BTreeMap::new();
        let mut report = RestoreReport::default();
        for d in segments {
            let (segment, len) = self.fetch_decoded(d, None).await?;
            report.segments += 1;
            report.bytes += len;
            let DecodedSegment {
                job,
                operator,
                spec,
                entries,
                ..
            } = segment;
            for (key, stored) in entries {
                let parts = EntryKey::decode(&key)?;
                let hash = key_hash(parts.key).map_err(|message| StateError::Migration {
                    operator: operator.to_string(),
                    state: spec.name.clone(),
                    from: d.schema_version,
                    message: format!(
                        "re-keying to stateShardCount {}: {message}",
                        target.state_shard_count
                    ),
                })?;
                let shard = weir_plan::key_hash::shard_of(hash, target.state_shard_count);
                if owners.get(shard.0 as usize) != Some(&subtask.0) {
                    continue;
                }
                let new_key = EntryKey { shard, ..parts }.encode();
                let group = groups
                    .entry((job.clone(), operator.clone(), shard, spec.name.clone()))
                    .or_insert_with(|| Group {
                        spec: spec.clone(),
                        entries: Vec::new(),
                    });
                group.entries.push((new_key, stored));
            }
        }
        let mut reregister = Registrations::default();
        for ((job, operator, shard, _), group) in groups {
            report.entries += group.entries.len() as u64;
            let previous =
                load_entries(backend, &job, &operator, shard, &group.spec, group.entries).await?;
            reregister.note(&job, &operator, &group.spec, previous, options);
        }
        reregister.apply(backend).await?;
        Ok(report)
    }
}

/// The entries of one new (job, operator, shard, state) during a shard-count migration.
struct Group {
    spec: StateSpec,
    entries: Vec<(Vec<u8>, Vec<u8>)>,
}
