//! The epoch manifest: the one entry point of recovery, as checksummed canonical
//! JSON.
//!
//! # Canonical JSON and the checksum rule
//!
//! A manifest is stored as the compact `serde_json` serialization of [`EpochManifest`]: no
//! whitespace, fields in declaration order (so `checksum` is the last field), objects inside
//! the opaque connector values (`cursor`, `discoveryCursor`, `preCommit`) with their keys sorted,
//! no trailing newline. The file therefore ends with
//!
//! ```text
//! ,"checksum":"<64 lowercase hex digits>"}
//! ```
//!
//! `checksum` is the lowercase hex SHA-256 of the file's bytes with those 64 digits removed, i.e.
//! of the same JSON with `"checksum":""`. Verification works on the stored bytes, never on a
//! re-serialization, so it does not depend on how a float or a map is printed:
//!
//! ```text
//! sed -E 's/"checksum":"[0-9a-f]{64}"}$/"checksum":""}/' manifest.json | sha256sum
//! ```
//!
//! (GNU sed adds no newline to a last line that has none.) A reformatted (pretty-printed)
//! manifest fails the check: the file is the canonical bytes or it is corrupt.

use crate::error::{CheckpointError, CheckpointResult};
use serde::{Deserialize, Serialize, Serializer};
use std::collections::{BTreeMap, BTreeSet};
use weir_api::{ChannelId, Epoch, EventTimeMs, JobId, OperatorId, PipelineId, SubtaskIndex};
use weir_api::{TaskId, VertexId};
use weir_plan::sha256_hex;
use weir_state::SegmentDescriptor;

/// The manifest format this build writes and reads (`formatVersion`). Version 2 added
/// `logicalFingerprint` and the `epoch` of sink transactions; version 3 image segments
/// (`lastShard`), in which window operators keep their state instead of keyed state.
pub const MANIFEST_FORMAT_VERSION: u32 = 3;

/// What every stored manifest ends with before the checksum's hex digits.
const CHECKSUM_OPEN: &[u8] = b",\"checksum\":\"";
/// What every stored manifest ends with after the checksum's hex digits.
const CHECKSUM_CLOSE: &[u8] = b"\"}";
/// Length of a SHA-256 in hex.
const HEX_LEN: usize = 64;

pub use crate::lifecycle::AttemptId;

/// Why an epoch was taken: a periodic checkpoint, which retention deletes when it is old, or a
/// savepoint a user asked for, which retention never deletes.
///
/// JSON: `{"type":"checkpoint"}` or `{"type":"savepoint","name":"before-upgrade"}`
/// (`name` may be `null`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
pub enum EpochKind {
    /// A periodic checkpoint.
    Checkpoint,
    /// A savepoint: kept until a user deletes it.
    Savepoint {
        /// The user's name for it, if any.
        name: Option<String>,
    },
}

/// The watermark state of one input channel of a task at the cut.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InputWatermark {
    /// The channel (one of the task's inputs in the plan).
    pub channel: ChannelId,
    /// The last watermark received on it; `None` when none arrived yet.
    pub watermark: Option<EventTimeMs>,
    /// Whether the channel was idle (left out of the watermark minimum).
    pub idle: bool,
    /// Whether the channel had delivered its end of input (it no longer blocks alignment).
    pub finished: bool,
}

/// Everything one task contributed to an epoch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskSnapshot {
    /// The stable task identity (no attempt id).
    pub task: TaskId,
    /// The task's state segments, written by `weir_state::PendingSnapshot::write` (per shard)
    /// and `weir_state::SegmentStore::write_image` (image segments of in-memory operators);
    /// each lies in this manifest's epoch directory.
    pub segments: Vec<SegmentDescriptor>,
    /// One entry per input channel of the task in the plan (none for a source task).
    pub input_watermarks: Vec<InputWatermark>,
}

/// The read position of one split of a source subtask at the cut: the
/// next-to-read position (exclusive cut), in the connector's own JSON form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SourceSplitOffset {
    /// The source operator.
    pub operator: OperatorId,
    /// The subtask that owned the split.
    pub subtask: SubtaskIndex,
    /// The split's stable id (a file URL, `topic/partition`).
    pub split: String,
    /// The connector's cursor, opaque to Weir.
    #[serde(serialize_with = "canonical_value")]
    pub cursor: serde_json::Value,
    /// The split's watermark at the cut; `None` when it had none yet.
    pub watermark: Option<EventTimeMs>,
}

/// The global split registry of one source operator at the cut.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnumeratorSnapshot {
    /// The source operator.
    pub operator: OperatorId,
    /// Every split discovered so far.
    pub discovered: BTreeSet<String>,
    /// Splits handed to a reader and not finished, with their owner subtask.
    pub assigned: BTreeMap<String, SubtaskIndex>,
    /// Splits read to their end: never assign them again.
    pub finished: BTreeSet<String>,
    /// The connector's discovery progress (file listing position, partition discovery), opaque.
    #[serde(serialize_with = "canonical_opt_value")]
    pub discovery_cursor: Option<serde_json::Value>,
}

/// A pending transaction of one sink subtask: what the sink needs to commit it
/// after the manifest is durable, or to abort it on recovery.
///
/// A manifest may list several transactions of one sink subtask: when an epoch is aborted while
/// the job continues, its pre-commit stays pending and is subsumed by the next durable epoch,
/// whose manifest lists it again with its own (older) `epoch`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SinkTransaction {
    /// The sink operator.
    pub operator: OperatorId,
    /// The sink subtask.
    pub subtask: SubtaskIndex,
    /// The epoch whose barrier pre-committed the transaction: at most the manifest's epoch.
    pub epoch: Epoch,
    /// The sink's pre-commit result (transaction handle, staged files), opaque to Weir.
    #[serde(serialize_with = "canonical_value")]
    pub pre_commit: serde_json::Value,
}

/// The manifest of one epoch: the complete, self-checking description of a consistent cut
/// (docs/checkpoints.md). Fields are public plain data; build one with
/// [`ExpectedCheckpoint::manifest_template`](crate::ExpectedCheckpoint::manifest_template) and
/// fill in the snapshots.
///
/// JSON field names are the camelCase of the Rust names, except `state_shard_counts`, which is
/// `stateShardCount`. Unknown fields are refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EpochManifest {
    /// [`MANIFEST_FORMAT_VERSION`] of the writer.
    pub format_version: u32,
    /// The checkpoint namespace; must match the manifest's path.
    pub namespace: String,
    /// The epoch; must match the manifest's path.
    pub epoch: Epoch,
    /// The job.
    pub job_id: JobId,
    /// The pipeline lineage.
    pub pipeline_id: PipelineId,
    /// Lowercase hex SHA-256 of the canonical JSON of the `PartitionedPlan` that took the epoch
    /// (`weir_plan::Plan::fingerprint`).
    pub plan_fingerprint: String,
    /// Lowercase hex SHA-256 of the plan without anything that depends on parallelism
    /// (`weir_plan::PartitionedPlan::logical_fingerprint`): equal for the same job at another
    /// parallelism, which is what a rescaled restore checks.
    pub logical_fingerprint: String,
    /// Checkpoint or savepoint.
    pub kind: EpochKind,
    /// The attempt of the job that took the epoch.
    pub attempt_id: AttemptId,
    /// `weir_state::STATE_FORMAT_VERSION` of the segments.
    pub state_format_version: u32,
    /// `stateShardCount` of every keyed vertex, by vertex id.
    #[serde(rename = "stateShardCount")]
    pub state_shard_counts: BTreeMap<VertexId, u32>,
    /// What a restore into a changed job needs to know of every operator of the job that took
    /// the epoch (`weir_plan::evolution`); absent from manifests written before it existed,
    /// which restore only into the same logic.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operators: Vec<weir_plan::evolution::OperatorProfile>,
    /// One entry per task of the plan's checkpoint ACK set, no more, no fewer.
    pub task_snapshots: Vec<TaskSnapshot>,
    /// Source read positions, one per (source operator, split).
    pub source_offsets: Vec<SourceSplitOffset>,
    /// Source split registries, one per source operator that has one.
    pub source_enumerator_snapshots: Vec<EnumeratorSnapshot>,
    /// Sink pending transactions, at most one per (sink operator, subtask, epoch).
    pub sink_transactions: Vec<SinkTransaction>,
    /// When the coordinator created the epoch, ms since the Unix epoch.
    pub created_at_ms: u64,
    /// When the coordinator published the manifest, ms since the Unix epoch (the manifest is
    /// immutable, so this is taken just before the write that makes it durable).
    pub durable_at_ms: u64,
    /// Lowercase hex SHA-256 of the canonical JSON with this field empty (module docs). Ignored
    /// when encoding: [`EpochManifest::to_json`] computes it.
    pub checksum: String,
}

fn canonical_value<S: Serializer>(value: &serde_json::Value, s: S) -> Result<S::Ok, S::Error> {
    weir_plan::canonicalize(value.clone()).serialize(s)
}

fn canonical_opt_value<S: Serializer>(
    value: &Option<serde_json::Value>,
    s: S,
) -> Result<S::Ok, S::Error> {
    value.clone().map(weir_plan::canonicalize).serialize(s)
}

/// The checksum stored manifest bytes record and the one computed from them now, by the
/// module's rule, `(recorded, computed)`: equal for an intact manifest. `path` names the file
/// in errors. For showing a manifest with its check (the workbench); a restore reads manifests
/// with [`EpochManifest::from_json`], which refuses a mismatch.
///
/// # Errors
/// [`CheckpointError::Corrupt`] when the bytes do not end with the checksum field.
pub fn stored_checksums(bytes: &[u8], path: &str) -> CheckpointResult<(String, String)> {
    let tail = CHECKSUM_OPEN.len() + HEX_LEN + CHECKSUM_CLOSE.len();
    let body_len = bytes.len().checked_sub(tail).ok_or_else(|| {
        CheckpointError::corrupt(
            path,
            format!("{} bytes is too short for a manifest", bytes.len()),
        )
    })?;
    let (body, rest) = bytes.split_at(body_len);
    let (open, rest) = rest.split_at(CHECKSUM_OPEN.len());
    let (hex, close) = rest.split_at(HEX_LEN);
    let is_hex = hex
        .iter()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b));
    if open != CHECKSUM_OPEN || close != CHECKSUM_CLOSE || !is_hex {
        return Err(CheckpointError::corrupt(
            path,
            "it does not end with `,\"checksum\":\"<64 lowercase hex digits>\"}` (was it \
             truncated or reformatted?)",
        ));
    }
    let computed = sha256_hex(&[body, EMPTY_CHECKSUM_TAIL].concat());
    Ok((String::from_utf8_lossy(hex).into_owned(), computed))
}

/// What the checksum is computed over in place of the stored tail.
const EMPTY_CHECKSUM_TAIL: &[u8] = b",\"checksum\":\"\"}";

impl EpochManifest {
    /// Whether this is a savepoint (never deleted by retention).
    pub fn is_savepoint(&self) -> bool {
        matches!(self.kind, EpochKind::Savepoint { .. })
    }

    /// Every state segment of every task.
    pub fn segments(&self) -> impl Iterator<Item = &SegmentDescriptor> {
        self.task_snapshots.iter().flat_map(|t| t.segments.iter())
    }

    /// The canonical JSON with the checksum filled in: the exact bytes to store. The
    /// `checksum` field of `self` is ignored.
    ///
    /// # Errors
    /// [`CheckpointError::Encode`] if serialization fails (it does not for these types).
    pub fn to_json(&self) -> CheckpointResult<Vec<u8>> {
        let (mut bytes, body_len, checksum) = self.encode()?;
        bytes.truncate(body_len);
        bytes.extend_from_slice(CHECKSUM_OPEN);
        bytes.extend_from_slice(checksum.as_bytes());
        bytes.extend_from_slice(CHECKSUM_CLOSE);
        Ok(bytes)
    }

    /// The checksum [`EpochManifest::to_json`] writes for this manifest.
    ///
    /// # Errors
    /// [`CheckpointError::Encode`] if serialization fails.
    pub fn compute_checksum(&self) -> CheckpointResult<String> {
        Ok(self.encode()?.2)
    }

    /// Parses stored manifest bytes, verifying the checksum first and then the format version;
    /// `path` names the file in errors. It does not check the manifest against a path or a
    /// plan: [`CheckpointStore::read_manifest`](crate::CheckpointStore::read_manifest) and
    /// [`ExpectedCheckpoint::validate`](crate::ExpectedCheckpoint::validate) do.
    ///
    /// # Errors
    /// [`CheckpointError::Corrupt`] for bytes that are not a canonical manifest (no checksum
    /// tail, not JSON, unknown or missing fields); [`CheckpointError::Checksum`] when the bytes
    /// do not hash to the recorded checksum; [`CheckpointError::FormatVersion`] for another
    /// manifest format.
    pub fn from_json(bytes: &[u8], path: &str) -> CheckpointResult<EpochManifest> {
        let (recorded, computed) = stored_checksums(bytes, path)?;
        if recorded != computed {
            return Err(CheckpointError::Checksum {
                path: path.to_owned(),
                recorded,
                computed,
            });
        }
        // The version first, so that a newer format is reported as such, not as unknown fields.
        let value: serde_json::Value = serde_json::from_slice(bytes)
            .map_err(|e| CheckpointError::corrupt(path, format!("not JSON: {e}")))?;
        match value
            .get("formatVersion")
            .and_then(serde_json::Value::as_u64)
        {
            Some(v) if v == u64::from(MANIFEST_FORMAT_VERSION) => {}
            Some(found) => {
                return Err(CheckpointError::FormatVersion {
                    path: path.to_owned(),
                    found,
                    expected: MANIFEST_FORMAT_VERSION,
                });
            }
            None => {
                return Err(CheckpointError::corrupt(
                    path,
                    "`formatVersion` is missing or not a number",
                ));
            }
        }
        serde_json::from_slice(bytes)
            .map_err(|e| CheckpointError::corrupt(path, format!("not a manifest: {e}")))
    }

    /// The serialization, the length of its part before the `,"checksum":...` tail, and the
    /// checksum. Serializing whatever `checksum` holds and cutting its known tail off avoids
    /// cloning the manifest to blank the field.
    fn encode(&self) -> CheckpointResult<(Vec<u8>, usize, String)> {
        let failed = |message: String| CheckpointError::Encode {
            context: format!("the manifest of epoch {}", self.epoch),
            message,
        };
        let full = serde_json::to_vec(self).map_err(|e| failed(e.to_string()))?;
        let mut tail = b",\"checksum\":".to_vec();
        tail.extend(serde_json::to_vec(&self.checksum).map_err(|e| failed(e.to_string()))?);
        tail.push(b'}');
        let body_len = full
            .len()
            .checked_sub(tail.len())
            .filter(|&n| full[n..] == tail[..])
            .ok_or_else(|| failed("`checksum` is not the last field".to_owned()))?;
        let checksum = sha256_hex(&[&full[..body_len], EMPTY_CHECKSUM_TAIL].concat());
        Ok((full, body_len, checksum))
    }
}
