//! What a file sink transaction carries toward a merged file (`auto_compaction`): the wire
//! types of the pre-commit JSON, below both the epoch protocol and compaction.

use serde::{Deserialize, Serialize};
use weir_api::{Error, Result};

/// One small staged file carried toward a merge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CarriedFile {
    /// Where it is staged, relative to the sink's `path`.
    pub(crate) staged: String,
    /// Its size in bytes.
    pub(crate) size: u64,
    /// The epoch whose rows it holds.
    pub(crate) epoch: u64,
}

/// The small files one transaction carries (every one not yet merged), in the pre-commit JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Carry {
    /// The carried files, oldest first.
    pub(crate) files: Vec<CarriedFile>,
    /// Whether committing the transaction merges and publishes them.
    pub(crate) merge: bool,
    /// Where the merged file is written before it is published, relative to the sink's `path`.
    pub(crate) merging: String,
    /// The merged file's final name, relative to the sink's `path`.
    #[serde(rename = "final")]
    pub(crate) final_name: String,
}

impl Carry {
    /// Checks that the carry stays in `staging` (the subtask's staging directory with a
    /// trailing `/`) and publishes directly into the sink's directory.
    pub(crate) fn check(&self, staging: &str, epoch: u64) -> Result<()> {
        let staged_ok =
            |p: &str| p.starts_with(staging) && !p.split('/').any(|s| s.is_empty() || s == "..");
        let final_ok = !self.final_name.is_empty()
            && !self.final_name.contains('/')
            && !self.final_name.starts_with(['.', '_']);
        if let Some(bad) = self
            .files
            .iter()
            .map(|f| f.staged.as_str())
            .chain([self.merging.as_str()])
            .find(|p| !staged_ok(p))
            .or((!final_ok).then_some(self.final_name.as_str()))
        {
            return Err(Error::Internal(format!(
                "file sink pre-commit of epoch {epoch} carries `{bad}`, outside the sink's \
                 staging directory or output directory"
            )));
        }
        Ok(())
    }
}
