//! Which splits each source subtask of an attempt reads: the enumerator's static round-robin
//! assignment at a fresh start (a restore assigns through
//! [`RestorePlan::splits_for`](crate::checkpoint::recovery::RestorePlan::splits_for)), and the
//! splits a restore lists again for sources that discover splits.

use crate::checkpoint::recovery::SplitResume;
use crate::error::{Error, Result};
use crate::prepare::{PreparedJob, PreparedNode};
use std::collections::{HashMap, HashSet};
use std::time::Duration;
use weir_api::{Boundedness, OperatorId, PreparedSource, SourceSplit};

/// The splits each source of the attempt starts from: as enumerated when the job was prepared,
/// and, on a restore, for sources that discover splits, also those their discovery lists now
/// (after the enumerated ones, in listing order).
pub(crate) async fn attempt_splits(
    job: &PreparedJob,
    restoring: bool,
) -> Result<HashMap<OperatorId, Vec<SourceSplit>>> {
    let mut listed = job.splits.clone();
    if !restoring {
        return Ok(listed);
    }
    for (operator, splits) in &mut listed {
        let Some(PreparedNode::Source(source)) = job.nodes.get(operator) else {
            continue;
        };
        if discovery_interval(source.as_ref()).is_none() {
            continue;
        }
        let found = source
            .discover_splits()
            .await
            .map_err(|source| Error::Task {
                task: operator.to_string(),
                source,
            })?;
        let ids: HashSet<String> = splits.iter().map(|s| s.id.clone()).collect();
        splits.extend(found.into_iter().filter(|s| {
            !ids.contains(&s.id) && job.split_share.is_none_or(|share| share.contains(&s.id))
        }));
    }
    Ok(listed)
}

/// Whether a source's subtasks keep running without splits, waiting for discovered ones: it
/// reads its splits concurrently, discovers splits and does not end by itself.
pub(crate) fn waits_for_discovered_splits(source: &dyn PreparedSource) -> bool {
    discovery_interval(source).is_some() && source.boundedness() == Boundedness::Unbounded
}

/// How often the subtasks of `source` discover splits: only sources that read their splits
/// concurrently do, at a non-zero interval.
pub(crate) fn discovery_interval(source: &dyn PreparedSource) -> Option<Duration> {
    if !source.reads_splits_concurrently() {
        return None;
    }
    source.discovery_interval().filter(|d| !d.is_zero())
}

/// The subtask of `parallelism` that reads a split found by partition discovery: the XXH64 of
/// its id (seed 0) modulo the parallelism, the same on every subtask.
pub(crate) fn discovered_split_owner(id: &str, parallelism: u32) -> u32 {
    let hash = twox_hash::XxHash64::oneshot(0, id.as_bytes());
    u32::try_from(hash % u64::from(parallelism.max(1))).unwrap_or(0)
}

/// The enumerator's static assignment: split `i` (in enumeration order) to subtask `i mod p`.
pub(crate) fn assign_splits(
    splits: Vec<SourceSplit>,
    parallelism: u32,
) -> Vec<Vec<(SourceSplit, SplitResume)>> {
    let mut out = vec![Vec::new(); parallelism as usize];
    for (i, s) in splits.into_iter().enumerate() {
        out[i % parallelism as usize].push((s, SplitResume::default()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_discovered_split_has_one_owner_within_the_parallelism() {
        for parallelism in [1, 2, 3, 7] {
            for id in ["bids/0", "bids/1", "bids/12", "asks/3"] {
                let owner = discovered_split_owner(id, parallelism);
                assert!(owner < parallelism);
                assert_eq!(owner, discovered_split_owner(id, parallelism));
            }
        }
        // XXH64("bids/1", seed 0): a fixed function of the id, not of the process.
        let hash = twox_hash::XxHash64::oneshot(0, b"bids/1");
        assert_eq!(u64::from(discovered_split_owner("bids/1", 5)), hash % 5);
    }
}
