//! Publishing and withdrawing the file sink's epoch transactions: the steps above the epoch
//! protocol's primitives ([`crate::epoch`]) that also merge carried files
//! ([`crate::compaction`]) and commit partitions ([`crate::partition_commit`]).

use crate::epoch::{STAGING_DIR, SinkSubtask, Transaction, delete_if_present, publish_file};
use crate::location::{FileLocation, store_error};
use futures::TryStreamExt;
use weir_api::Result;

/// Publishes `transactions` (in order): renames each staged file to its final name unless the
/// final file already exists, then writes the success file `success_file` (when partitions are
/// committed) into each partition the transaction commits, and merges the carried files that
/// are due ([`crate::compaction::commit`]; `merge.1` for a writer's last transactions).
/// Returns the transactions parsed.
///
/// # Errors
/// External errors from the store; [`Error::External`] (not retryable) when a staged file is gone
/// and its final file does not exist, or a final file of another size is in the way.
pub(crate) async fn commit(
    location: &FileLocation,
    owner: &SinkSubtask,
    transactions: &[serde_json::Value],
    success_file: Option<&str>,
    merge: (crate::compaction::MergeSettings, bool),
) -> Result<Vec<Transaction>> {
    let mut parsed = Vec::with_capacity(transactions.len());
    for value in transactions {
        let tx = Transaction::parse(value, owner)?;
        for file in &tx.files {
            publish_file(location, file).await?;
        }
        if let Some(name) = success_file {
            crate::partition_commit::write_success_files(location, &tx.partitions, name).await?;
        }
        tracing::debug!(
            epoch = tx.epoch,
            subtask = owner.subtask,
            files = tx.files.len(),
            "published file sink epoch"
        );
        parsed.push(tx);
    }
    crate::compaction::commit(location, &parsed, merge.0, merge.1).await?;
    Ok(parsed)
}

/// Recovery from `epoch` when newer epochs were durable: deletes the published files of every
/// subtask of `sink`'s sink (the job and operator it names) whose final names carry an epoch
/// after `epoch`, and returns their names as users see them, sorted. Other sinks' files and
/// files written without checkpoints (other names) are left alone. The sink's directory is
/// listed at every depth (partition directories), except the staging directory.
///
/// # Errors
/// External errors from the store.
pub(crate) async fn withdraw_after(
    location: &FileLocation,
    sink: &SinkSubtask,
    epoch: u64,
) -> Result<Vec<String>> {
    let store = location.store();
    let base = location.base();
    let prefix = (!base.as_ref().is_empty()).then_some(base);
    let listed = match store.list(prefix).try_collect::<Vec<_>>().await {
        Ok(listed) => listed,
        Err(object_store::Error::NotFound { .. }) => Vec::new(),
        Err(e) => return Err(store_error(format!("listing `{}`", location.given()), e)),
    };
    // Published files only: a merged file still in `_staging/…/merged/` is not published.
    let names = listed
        .iter()
        .filter(|m| {
            m.location
                .prefix_match(base)
                .and_then(|mut r| r.next())
                .is_some_and(|first| first.as_ref() != STAGING_DIR)
        })
        .filter_map(|m| m.location.filename());
    crate::compaction::check_withdraw(location, sink, names, epoch)?;
    let mut withdrawn = Vec::new();
    for meta in listed {
        let Some(relative) = meta.location.prefix_match(base) else {
            continue;
        };
        let relative: Vec<String> = relative.map(|p| p.as_ref().to_owned()).collect();
        if relative.first().is_none_or(|first| first == STAGING_DIR) {
            continue;
        }
        let Some((_, file_epoch)) = relative.last().and_then(|n| sink.parse_final_name(n)) else {
            continue;
        };
        if file_epoch <= epoch {
            continue;
        }
        let shown = location.display(&relative.join("/"));
        delete_if_present(store.as_ref(), &meta.location, &shown).await?;
        withdrawn.push(shown);
    }
    withdrawn.sort();
    tracing::info!(
        after = epoch,
        files = withdrawn.len(),
        "withdrew published files of passed-over epochs"
    );
    Ok(withdrawn)
}
