//! The object-store layout of a checkpoint namespace: one layout shared with the state segments
//! of `weir-state`.
//!
//! ```text
//! {base}/checkpoint/{namespace}/{epoch}/manifest.json                          the epoch manifest
//! {base}/checkpoint/{namespace}/{epoch}/{operator}/{subtask}/{shard}/{state}.parquet  segments
//! {base}/checkpoint/{namespace}/{epoch}/{operator}/{subtask}/{first}-{last}/{state}.parquet
//!                                                       image segments (in-memory operators)
//! {base}/checkpoint/{namespace}/log/{epoch}-{STATE}.json                       epoch log records
//! {base}/checkpoint/{namespace}/attempts/{attempt:020}                         attempt fences
//! ```
//!
//! `epoch` is decimal without padding because the segment paths of
//! [`weir_state::segment::segment_path`] and [`weir_state::segment::image_segment_path`]
//! already are; readers parse directory names as numbers
//! and accept only the canonical form (`7`, never `007`), so listing order does not matter.
//! Each part is percent-encoded by `object_store::path` exactly as `weir-state` encodes it, so
//! a namespace or id with a `/` stays one path part. `log` and `attempts` are not numbers, so
//! they can never be taken for epoch directories. Attempt objects are named by the attempt
//! number zero-padded to 20 digits (every `u64` fits), so they also sort by name. All paths here are relative to the store's base path, like
//! [`weir_state::SegmentDescriptor::path`].

use crate::lifecycle::AttemptId;
use crate::lifecycle::EpochState;
use object_store::path::Path as ObjectPath;
use weir_api::Epoch;

/// The first part of every checkpoint path (shared with the state segments).
pub const CHECKPOINT_DIR: &str = "checkpoint";
/// File name of an epoch's manifest inside its epoch directory.
pub const MANIFEST_FILE: &str = "manifest.json";
/// Directory of the epoch log records inside a namespace.
pub const LOG_DIR: &str = "log";
/// Suffix of an epoch log record.
pub const LOG_SUFFIX: &str = ".json";
/// Directory of the attempt objects inside a namespace.
pub const ATTEMPTS_DIR: &str = "attempts";
/// Digits of an attempt object's name.
const ATTEMPT_DIGITS: usize = 20;

/// `checkpoint/{namespace}`: everything of one checkpoint namespace.
pub fn namespace_path(namespace: &str) -> ObjectPath {
    ObjectPath::from_iter([CHECKPOINT_DIR, namespace])
}

/// `checkpoint/{namespace}/{epoch}`: the manifest and the segments of one epoch.
pub fn epoch_path(namespace: &str, epoch: Epoch) -> ObjectPath {
    ObjectPath::from_iter([CHECKPOINT_DIR, namespace, &epoch.0.to_string()])
}

/// `checkpoint/{namespace}/{epoch}/manifest.json`.
pub fn manifest_path(namespace: &str, epoch: Epoch) -> ObjectPath {
    ObjectPath::from_iter([
        CHECKPOINT_DIR,
        namespace,
        &epoch.0.to_string(),
        MANIFEST_FILE,
    ])
}

/// `checkpoint/{namespace}/log`: the epoch log.
pub fn log_path(namespace: &str) -> ObjectPath {
    ObjectPath::from_iter([CHECKPOINT_DIR, namespace, LOG_DIR])
}

/// `checkpoint/{namespace}/log/{epoch}-{STATE}.json`: the record of one persisted transition.
pub fn log_record_path(namespace: &str, epoch: Epoch, state: EpochState) -> ObjectPath {
    let file = format!("{}-{}{LOG_SUFFIX}", epoch.0, state.as_str());
    ObjectPath::from_iter([CHECKPOINT_DIR, namespace, LOG_DIR, &file])
}

/// `checkpoint/{namespace}/attempts`: one empty object per attempt of the job.
pub fn attempts_path(namespace: &str) -> ObjectPath {
    ObjectPath::from_iter([CHECKPOINT_DIR, namespace, ATTEMPTS_DIR])
}

/// `checkpoint/{namespace}/attempts/{attempt:020}`: the object that claims `attempt`.
pub fn attempt_path(namespace: &str, attempt: AttemptId) -> ObjectPath {
    let file = format!("{:0width$}", attempt.0, width = ATTEMPT_DIGITS);
    ObjectPath::from_iter([CHECKPOINT_DIR, namespace, ATTEMPTS_DIR, &file])
}

/// The attempt an attempt object's name stands for: exactly 20 decimal digits.
pub(crate) fn parse_attempt_name(name: &str) -> Option<AttemptId> {
    if name.len() != ATTEMPT_DIGITS || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    name.parse().ok().map(AttemptId)
}

/// The epoch an epoch directory name stands for: canonical decimal only.
pub(crate) fn parse_epoch(part: &str) -> Option<Epoch> {
    let n: u64 = part.parse().ok()?;
    (n.to_string() == part).then_some(Epoch(n))
}

/// The epoch and state a log record's file name stands for.
pub(crate) fn parse_log_record_name(name: &str) -> Option<(Epoch, EpochState)> {
    let stem = name.strip_suffix(LOG_SUFFIX)?;
    let (epoch, state) = stem.split_once('-')?;
    let state = EpochState::ALL.into_iter().find(|s| s.as_str() == state)?;
    Some((parse_epoch(epoch)?, state))
}

/// `base` followed by `relative`.
pub(crate) fn join(base: &ObjectPath, relative: &ObjectPath) -> ObjectPath {
    ObjectPath::from_iter(base.parts().chain(relative.parts()))
}

/// `path` without the leading `base`, or `None` when it is not under `base`.
pub(crate) fn strip_base(base: &ObjectPath, path: &ObjectPath) -> Option<ObjectPath> {
    path.prefix_match(base).map(ObjectPath::from_iter)
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_api::{OperatorId, StateShardId, SubtaskIndex};

    #[test]
    fn segments_live_in_the_manifest_epoch_directory() {
        let segment = weir_state::segment::segment_path(
            "ns/1",
            Epoch(42),
            &OperatorId::new("agg"),
            SubtaskIndex(1),
            StateShardId(3),
            "count",
        );
        let image = weir_state::segment::image_segment_path(
            "ns/1",
            Epoch(42),
            &OperatorId::new("win"),
            SubtaskIndex(1),
            StateShardId(4),
            StateShardId(7),
            "groups",
        );
        assert_eq!(
            image.to_string(),
            "checkpoint/ns%2F1/42/win/1/4-7/groups.parquet"
        );
        let dir = epoch_path("ns/1", Epoch(42));
        for segment in [&segment, &image] {
            assert!(
                segment.prefix_matches(&dir),
                "{segment} must be under {dir}: one layout for segments and manifests"
            );
        }
        assert_eq!(dir.to_string(), "checkpoint/ns%2F1/42");
        assert_eq!(
            manifest_path("ns/1", Epoch(42)).to_string(),
            "checkpoint/ns%2F1/42/manifest.json"
        );
        assert_eq!(
            log_record_path("ns", Epoch(7), EpochState::Durable).to_string(),
            "checkpoint/ns/log/7-DURABLE.json"
        );
    }

    #[test]
    fn only_canonical_decimal_names_are_epochs() {
        assert_eq!(parse_epoch("0"), Some(Epoch(0)));
        assert_eq!(parse_epoch("18446744073709551615"), Some(Epoch(u64::MAX)));
        for bad in ["007", "+7", "-1", "log", "", "7a", "18446744073709551616"] {
            assert_eq!(parse_epoch(bad), None, "{bad}");
        }
        assert_eq!(
            parse_log_record_name("12-COMMITTED.json"),
            Some((Epoch(12), EpochState::Committed))
        );
        assert_eq!(
            attempt_path("ns", AttemptId(42)).to_string(),
            "checkpoint/ns/attempts/00000000000000000042"
        );
        assert_eq!(
            parse_attempt_name("00000000000000000042"),
            Some(AttemptId(42))
        );
        assert_eq!(
            parse_attempt_name("18446744073709551615"),
            Some(AttemptId(u64::MAX))
        );
        for bad in [
            "42",
            "0000000000000000004a",
            "99999999999999999999",
            "+0000000000000000042",
        ] {
            assert_eq!(parse_attempt_name(bad), None, "{bad}");
        }
        for bad in [
            "12-committed.json",
            "12-DONE.json",
            "012-DURABLE.json",
            "12-DURABLE",
        ] {
            assert_eq!(parse_log_record_name(bad), None, "{bad}");
        }
    }
}
