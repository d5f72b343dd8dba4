//! The job manifest: the Hub's record, in the job's checkpoint storage, of a job-level
//! checkpoint or savepoint that every lane of one generation completed.

use crate::jobs::CheckpointKind;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// Directory, under the job's checkpoint directory, that holds the job manifests
/// (`<dir>/job-manifests/<checkpointId>.json`), beside the `checkpoint/` tree where the lanes,
/// each a job of its own, keep their checkpoints (docs/checkpoints.md, "Storage layout").
pub const MANIFEST_DIR: &str = "job-manifests";

/// What a job manifest records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobManifestBody {
    /// The job.
    pub job_id: String,
    /// The version the lanes ran.
    pub version_id: String,
    /// The generation the lanes ran in.
    pub generation: u64,
    /// Keyed-state format version of the lanes' state.
    pub state_format_version: u32,
    /// The job-level checkpoint's id.
    pub checkpoint_id: String,
    /// Checkpoint or savepoint.
    pub kind: CheckpointKind,
    /// The savepoint's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub savepoint_name: Option<String>,
    /// Durable epoch of every lane.
    pub lane_epochs: BTreeMap<u32, u64>,
    /// When the Hub asked for it (RFC 3339).
    pub created_at: String,
    /// When the last lane reported (RFC 3339).
    pub completed_at: String,
}

impl JobManifestBody {
    /// The canonical JSON of the body: compact, fields in declaration order, lanes in
    /// ascending order. The checksum is over these bytes.
    pub fn canonical_json(&self) -> String {
        // A struct of strings, numbers and a map with integer keys always serializes.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Lower-case hex SHA-256 of [`JobManifestBody::canonical_json`].
    pub fn checksum(&self) -> String {
        format!("{:x}", Sha256::digest(self.canonical_json().as_bytes()))
    }
}

/// A job manifest as stored: the body and its checksum.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobManifest {
    /// What it records.
    pub body: JobManifestBody,
    /// SHA-256 of the body's canonical JSON.
    pub checksum: String,
}

impl JobManifest {
    /// Seals a body with its checksum.
    pub fn seal(body: JobManifestBody) -> Self {
        let checksum = body.checksum();
        JobManifest { body, checksum }
    }

    /// Whether the checksum is the one of the body (a damaged or edited manifest is not).
    pub fn verify(&self) -> bool {
        self.body.checksum() == self.checksum
    }

    /// The object path of a manifest relative to the job's checkpoint directory.
    pub fn relative_path(checkpoint_id: &str) -> String {
        format!("{MANIFEST_DIR}/{checkpoint_id}.json")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body() -> JobManifestBody {
        JobManifestBody {
            job_id: "j".into(),
            version_id: "v".into(),
            generation: 3,
            state_format_version: 1,
            checkpoint_id: "c".into(),
            kind: CheckpointKind::Savepoint,
            savepoint_name: Some("before-upgrade".into()),
            lane_epochs: BTreeMap::from([(1, 7), (0, 9)]),
            created_at: "2026-01-01T00:00:00Z".into(),
            completed_at: "2026-01-01T00:00:01Z".into(),
        }
    }

    #[test]
    fn a_sealed_manifest_verifies_and_an_edited_one_does_not() {
        let manifest = JobManifest::seal(body());
        assert!(manifest.verify());
        let text = serde_json::to_string(&manifest).unwrap();
        let mut back: JobManifest = serde_json::from_str(&text).unwrap();
        assert_eq!(back, manifest);
        back.body.lane_epochs.insert(0, 10);
        assert!(!back.verify());
    }

    #[test]
    fn the_canonical_body_orders_lanes() {
        let json = body().canonical_json();
        assert!(json.contains(r#""laneEpochs":{"0":9,"1":7}"#), "{json}");
    }
}
