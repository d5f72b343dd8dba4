//! Compaction of a Delta table's small files: a partition's small files are read and written
//! again as one file near the target size, in a commit that removes the small files and adds
//! the merged one, both with `dataChange: false` (Delta's `OPTIMIZE`), so streaming readers of
//! the table's changes see no new rows.

use crate::table::TableLocation;
use deltalake_core::kernel::transaction::{CommitBuilder, CommitProperties, TransactionError};
use deltalake_core::kernel::{Action, LogicalFileView};
use deltalake_core::protocol::DeltaOperation;
use deltalake_core::writer::{DeltaWriter, RecordBatchWriter, WriteMode};
use deltalake_core::{DeltaTable, DeltaTableError};
use futures::TryStreamExt;
use indexmap::IndexMap;
use parquet::arrow::ParquetRecordBatchStreamBuilder;
use std::collections::BTreeMap;
use weir_api::Result;
use weir_api::failpoint::failpoint;

/// How often a compaction commit is tried again on a newer version of the table after another
/// writer committed the version it was made on.
const MAX_COMPACTION_ATTEMPTS: u32 = 20;

/// Whether a commit failed only because the table moved on since the snapshot it was built
/// on (another writer committed first), so it can be checked and tried again.
pub(crate) fn lost_the_version(e: &DeltaTableError) -> bool {
    matches!(
        e,
        DeltaTableError::VersionAlreadyExists(_)
            | DeltaTableError::Transaction {
                source: TransactionError::MaxCommitAttempts(_)
            }
    )
}

/// When and how far small files are merged.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Compaction {
    /// The size merged files aim at; a file of at least half of it is not small.
    pub(crate) target_size: u64,
    /// A partition's small files are merged once there are this many.
    pub(crate) min_files: usize,
}

/// The files one compaction commit merges: a partition's small files, oldest paths first, up
/// to the target size.
struct Merge {
    files: Vec<LogicalFileView>,
}

/// Merges the small files of every partition that has at least `min_files` of them, one
/// commit per partition. Returns how many files were merged away (a merge another writer made
/// first is not committed again and not counted).
///
/// # Errors
/// External errors when reading, writing or committing fails; the table is then unchanged
/// (a merged file written but not committed is in no commit, so no reader sees it).
pub(crate) async fn compact(
    table: &DeltaTable,
    location: &TableLocation,
    policy: Compaction,
) -> Result<usize> {
    let mut merged = 0;
    for merge in plan(table, location, policy)? {
        let files = merge.files.len();
        if merge_files(table, location, policy, merge).await? {
            merged += files;
        }
    }
    Ok(merged)
}

/// The merges the table's current files call for.
fn plan(table: &DeltaTable, location: &TableLocation, policy: Compaction) -> Result<Vec<Merge>> {
    let snapshot = table.snapshot().map_err(|e| location.error("reading", e))?;
    let small = policy.target_size / 2;
    let mut by_partition: BTreeMap<Vec<(String, Option<String>)>, Vec<LogicalFileView>> =
        BTreeMap::new();
    for file in snapshot.log_data().iter() {
        if u64::try_from(file.size()).unwrap_or(u64::MAX) >= small
            || file.deletion_vector_descriptor().is_some()
        {
            continue;
        }
        let mut key: Vec<(String, Option<String>)> =
            file.partition_values_map().into_iter().collect();
        key.sort();
        by_partition.entry(key).or_default().push(file);
    }
    let mut merges = Vec::new();
    for (_, files) in by_partition {
        // Size tiers: files merge only with files of about their size (the same power of
        // `min_files`), so a merged file is merged again only once `min_files` files of its
        // own size exist. Each byte is then rewritten about log_min_files(target / file size)
        // times, not once per compaction as it would be if a growing file took in every new
        // small file.
        let mut tiers: BTreeMap<u32, Vec<LogicalFileView>> = BTreeMap::new();
        for file in files {
            let size = u64::try_from(file.size()).unwrap_or(0);
            tiers
                .entry(tier(size, policy.min_files))
                .or_default()
                .push(file);
        }
        for (_, mut files) in tiers {
            if files.len() < policy.min_files {
                continue;
            }
            files.sort_by(|a, b| a.path().cmp(&b.path()));
            let mut chosen = Vec::new();
            let mut bytes = 0_u64;
            for file in files {
                let size = u64::try_from(file.size()).unwrap_or(0);
                if chosen.len() >= 2 && bytes + size > policy.target_size {
                    break;
                }
                bytes += size;
                chosen.push(file);
            }
            merges.push(Merge { files: chosen });
        }
    }
    Ok(merges)
}

/// The size tier of a file of `size` bytes: the power of `base` its size is in.
fn tier(size: u64, base: usize) -> u32 {
    let base = base.max(2) as u64;
    let mut tier = 0;
    let mut bound = base;
    while size >= bound {
        tier += 1;
        bound = bound.saturating_mul(base);
        if bound == u64::MAX {
            break;
        }
    }
    tier
}

/// Reads `merge`'s files, writes them as one, and commits the swap unless another writer
/// removed one of them first. Returns whether it committed.
async fn merge_files(
    table: &DeltaTable,
    location: &TableLocation,
    policy: Compaction,
    merge: Merge,
) -> Result<bool> {
    let store = table.object_store();
    // The partition's values, as the writer takes them (all files of a merge share them).
    let partition: IndexMap<_, _> = merge.files[0]
        .partition_values()
        .map(|values| {
            values
                .fields()
                .iter()
                .zip(values.values())
                .map(|(f, v)| (f.name().clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    let mut writer = RecordBatchWriter::for_table(table)
        .map_err(|e| location.error("compacting", e))?
        .with_target_file_size(policy.target_size.saturating_mul(2));
    for file in &merge.files {
        let reader = weir_file::ObjectParquetReader::new(
            store.clone(),
            file.object_store_path(),
            u64::try_from(file.size()).unwrap_or(0),
        );
        let stream = ParquetRecordBatchStreamBuilder::new(reader)
            .await
            .map_err(|e| location.error(&format!("reading {} of", file.path()), e))?
            .build()
            .map_err(|e| location.error(&format!("reading {} of", file.path()), e))?;
        let batches: Vec<_> = stream
            .try_collect()
            .await
            .map_err(|e| location.error(&format!("reading {} of", file.path()), e))?;
        for batch in batches {
            writer
                .write_partition(batch, &partition, WriteMode::Default)
                .await
                .map_err(|e| location.error("compacting", e))?;
        }
    }
    let adds = writer
        .flush()
        .await
        .map_err(|e| location.error("compacting", e))?;
    failpoint("delta-mid-compaction");
    let mut actions: Vec<Action> = merge
        .files
        .iter()
        .map(|f| Action::Remove(f.remove_action(false)))
        .collect();
    actions.extend(adds.into_iter().map(|mut add| {
        add.data_change = false;
        Action::Add(add)
    }));
    let operation = DeltaOperation::Optimize {
        predicate: None,
        target_size: i64::try_from(policy.target_size).unwrap_or(i64::MAX),
    };
    // delta-rs's conflict check lets two commits remove the same file when neither changes
    // data (`dataChange: false`), so two writers (lanes of a job) that planned the same merge
    // would both commit it and every row of the merged files would be in the table twice. The
    // commit is therefore made only on the version whose files were checked (no retry on a
    // later version: a compare-and-swap of the log's next version); when another writer took
    // it, the table is read again and the merge committed only while all its files are live.
    let mut table = table.clone();
    let mut attempts = 0;
    let finalized = loop {
        let snapshot = table.snapshot().map_err(|e| location.error("reading", e))?;
        let live: std::collections::HashSet<String> = snapshot
            .log_data()
            .iter()
            .map(|f| f.path().to_string())
            .collect();
        if let Some(gone) = merge
            .files
            .iter()
            .find(|f| !live.contains(&f.path().to_string()))
        {
            // Another writer merged (or removed) a file of this merge first: the merged file
            // written here is in no commit, so no reader sees it.
            tracing::info!(table = %location.given(), file = %gone.path(), "another writer compacted these files first; not committing this merge");
            return Ok(false);
        }
        let committed = CommitBuilder::from(CommitProperties::default().with_max_retries(0))
            .with_actions(actions.clone())
            .build(Some(snapshot), table.log_store(), operation.clone())
            .await;
        match committed {
            Ok(finalized) => break finalized,
            Err(e) if attempts < MAX_COMPACTION_ATTEMPTS && lost_the_version(&e) => {
                attempts += 1;
                table
                    .update_state()
                    .await
                    .map_err(|e| location.error("reading", e))?;
            }
            Err(e) => return Err(location.error("committing a compaction of", e)),
        }
    };
    tracing::info!(table = %location.given(), version = finalized.version(), files = merge.files.len(), "compacted small files of the Delta table");
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::tier;

    #[test]
    fn files_of_about_one_size_share_a_tier() {
        assert_eq!(tier(0, 10), 0);
        assert_eq!(tier(9, 10), 0);
        assert_eq!(tier(10, 10), 1);
        assert_eq!(tier(71_000, 10), 4);
        assert_eq!(tier(99_999, 10), 4);
        // Ten merged 71 KB files make a file of the next tier, which waits for nine more.
        assert_eq!(tier(710_000, 10), 5);
        assert_eq!(tier(u64::MAX, 10), 19);
        assert_eq!(tier(5, 1), 2);
    }
}
