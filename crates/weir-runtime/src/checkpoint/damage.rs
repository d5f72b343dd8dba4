//! Telling a damaged checkpoint from other restore failures: when loading a task's state fails,
//! the task's segments are checked against the SHA-256 sums their manifest records, and damage
//! becomes an error that names the file and the older epochs that could be restored instead.

use super::CheckpointConfig;
use super::recovery::RestorePlan;
use crate::error::Error;
use std::path::Path;
use weir_api::Epoch;
use weir_checkpoint::{CheckpointStore, DamagedSegment, ExpectedCheckpoint};
use weir_state::SegmentDescriptor;

/// The error to report for a restore of `segments` that failed with `error`: a
/// [`Error::DamagedCheckpoint`] when a segment's bytes are not the ones the manifest records
/// (or it is gone), otherwise `error` itself.
pub(crate) async fn explain(
    config: &CheckpointConfig,
    store: &CheckpointStore,
    expected: &ExpectedCheckpoint,
    restore: &RestorePlan,
    segments: &[SegmentDescriptor],
    error: Error,
) -> Error {
    let damaged = match store.damaged_segments(segments).await {
        Ok(damaged) if !damaged.is_empty() => damaged,
        // Nothing damaged, or the store cannot even be read: the original error says more.
        _ => return error,
    };
    let epoch = restore.epoch();
    let storage = &config.storage;
    let damage = damaged
        .iter()
        .map(|d| describe(storage.local_root.as_deref(), d))
        .collect::<Vec<_>>()
        .join("; ");
    let older = restorable_before(store, expected, epoch).await;
    Error::DamagedCheckpoint {
        epoch,
        storage: storage.display.clone(),
        damage,
        older,
    }
}

/// One damaged segment in words, as a file path when the storage is a local directory.
fn describe(local_root: Option<&Path>, d: &DamagedSegment) -> String {
    let file = match local_root {
        Some(root) => root.join(&d.path).display().to_string(),
        None => d.path.clone(),
    };
    match &d.actual {
        Some(actual) => format!(
            "state segment {file} has SHA-256 {actual}, but its manifest records {}",
            d.recorded
        ),
        None => format!("state segment {file} is missing"),
    }
}

/// The epochs before `epoch` that pass every check a restore makes before loading state
/// (manifest or its copy intact, plan fits, segments there), oldest first. A failing store
/// leaves the list empty rather than hiding the damage report.
async fn restorable_before(
    store: &CheckpointStore,
    expected: &ExpectedCheckpoint,
    epoch: Epoch,
) -> Vec<Epoch> {
    let Ok(epochs) = store.published_epochs().await else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for candidate in epochs.into_iter().filter(|e| *e < epoch) {
        if store.restore_point(candidate, expected).await.is_ok() {
            out.push(candidate);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn damage_names_the_file_on_disk_or_in_the_store() {
        let d = DamagedSegment {
            path: "checkpoint/job/9/w/0/0-15/windows.parquet".into(),
            relative_path: "checkpoint/job/9/w/0/0-15/windows.parquet".into(),
            recorded: "aa".into(),
            actual: Some("bb".into()),
        };
        assert_eq!(
            describe(Some(Path::new("/data/cp")), &d),
            "state segment /data/cp/checkpoint/job/9/w/0/0-15/windows.parquet has SHA-256 bb, \
             but its manifest records aa"
        );
        let gone = DamagedSegment { actual: None, ..d };
        assert_eq!(
            describe(None, &gone),
            "state segment checkpoint/job/9/w/0/0-15/windows.parquet is missing"
        );
    }

    #[test]
    fn the_message_says_damage_and_which_epochs_could_be_restored() {
        let err = Error::DamagedCheckpoint {
            epoch: Epoch(9),
            storage: "/data/cp".into(),
            damage: "state segment x is missing".into(),
            older: vec![Epoch(7), Epoch(8)],
        };
        let text = err.to_string();
        assert!(
            text.contains("checkpoint of epoch 9 in /data/cp is damaged"),
            "{text}"
        );
        assert!(text.contains("state segment x is missing"), "{text}");
        assert!(
            text.contains("epochs 7, 8") && text.contains("--restore <epoch>"),
            "{text}"
        );
        let none = Error::DamagedCheckpoint {
            epoch: Epoch(1),
            storage: "/data/cp".into(),
            damage: "d".into(),
            older: vec![],
        };
        assert!(
            none.to_string()
                .contains("no older checkpoint can be restored"),
            "{none}"
        );
        assert_eq!(none.kind(), weir_api::ErrorKind::External);
    }
}
