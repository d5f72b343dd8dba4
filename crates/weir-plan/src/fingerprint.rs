//! Canonical JSON and fingerprints: every plan serializes to one exact byte string, and its
//! fingerprint is the SHA-256 of those bytes.

use crate::error::Result;
use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};

/// A plan that has a canonical JSON form and a fingerprint.
///
/// Canonical JSON is compact `serde_json` output of the plan's structs: field order is the struct
/// order, options objects have their keys sorted (see [`canonicalize`]), so equal plans give equal
/// bytes in any process.
pub trait Plan: Serialize + DeserializeOwned {
    /// The canonical JSON of the plan.
    fn to_json(&self) -> String {
        // Serializing plain structs with string keys cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The plan as indented JSON for people (not canonical: do not fingerprint it).
    fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Reads a plan back from JSON (canonical or pretty).
    ///
    /// # Errors
    /// [`crate::Error::PlanJson`] when the JSON does not describe this plan.
    fn from_json(json: &str) -> Result<Self> {
        Ok(serde_json::from_str(json)?)
    }

    /// Lower-case hex SHA-256 of the canonical JSON.
    fn fingerprint(&self) -> String {
        sha256_hex(self.to_json().as_bytes())
    }
}

/// Lower-case hex SHA-256 of `bytes`: the one digest Weir writes into plans, manifests and
/// segment descriptors, so that `sha256sum` on the same bytes prints the same string.
pub fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// Sorts the keys of every object in `value`, recursively, so that options written in any key
/// order (or parsed by a serde_json built with `preserve_order`) serialize identically.
pub fn canonicalize(value: serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => {
            let mut entries: Vec<(String, serde_json::Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            serde_json::Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, canonicalize(v)))
                    .collect(),
            )
        }
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.into_iter().map(canonicalize).collect())
        }
        other => other,
    }
}
