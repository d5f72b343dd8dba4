//! The `options` of a `delta` sink and source node, decoded with errors that name the field.

use serde::{Deserialize, Serialize};
use weir_api::{Error, Result, S3Options};

/// Delta's default: a checkpoint of the log every this many commits (`delta.checkpointInterval`).
pub const DEFAULT_CHECKPOINT_INTERVAL: u64 = 10;

/// The default size a sink rolls a data file at, and that compaction merges small files up to.
pub const DEFAULT_TARGET_FILE_SIZE: u64 = 128 * 1024 * 1024;

/// The `options` of a `delta` sink node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeltaSinkOptions {
    /// The table's directory: a local path or a URL (`file:///abs/table`, `s3://bucket/table`).
    pub path: String,
    /// How to reach the server of an `s3://` path; unset fields come from the AWS environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3: Option<S3Options>,
    /// The partition columns of a table the sink creates (`PARTITIONED BY` in SQL); an existing
    /// table must have exactly these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partition_by: Vec<String>,
    /// A data file is closed and a new one started once it holds about this many bytes.
    #[serde(default = "default_target_file_size")]
    pub target_file_size: u64,
    /// The table property `delta.checkpointInterval` of a table the sink creates: Delta writes a
    /// checkpoint of its log every this many commits, so readers replay few JSON commits.
    #[serde(default = "default_checkpoint_interval")]
    pub checkpoint_interval: u64,
    /// Merge the small files of committed epochs into files near `compaction_file_size`, in a
    /// commit of its own that changes no data (`dataChange: false`).
    #[serde(default)]
    pub auto_compaction: bool,
    /// The size compaction merges files up to (default: `target_file_size`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction_file_size: Option<u64>,
    /// Compaction merges a partition's small files once it has at least this many (default 10).
    #[serde(default = "default_compaction_min_files")]
    pub compaction_min_files: usize,
}

fn default_target_file_size() -> u64 {
    DEFAULT_TARGET_FILE_SIZE
}

fn default_checkpoint_interval() -> u64 {
    DEFAULT_CHECKPOINT_INTERVAL
}

fn default_compaction_min_files() -> usize {
    10
}

impl DeltaSinkOptions {
    /// The size compaction merges up to.
    pub fn compaction_target(&self) -> u64 {
        self.compaction_file_size.unwrap_or(self.target_file_size)
    }

    /// Checks what serde cannot: ranges, and S3 options only with an `s3://` path.
    ///
    /// # Errors
    /// [`Error::Config`] naming the offending field below `path`.
    pub fn validate(&self, path: &str) -> Result<()> {
        check_location(&self.path, self.s3.as_ref(), path)?;
        for (field, value) in [
            ("target_file_size", self.target_file_size),
            ("checkpoint_interval", self.checkpoint_interval),
            (
                "compaction_file_size",
                self.compaction_file_size.unwrap_or(1),
            ),
            ("compaction_min_files", self.compaction_min_files as u64),
        ] {
            if value == 0 {
                return Err(Error::config(
                    format!("{path}.{field}"),
                    "must be at least 1",
                ));
            }
        }
        if self.compaction_min_files < 2 {
            return Err(Error::config(
                format!("{path}.compaction_min_files"),
                "must be at least 2 (merging one file into one changes nothing)",
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for (i, column) in self.partition_by.iter().enumerate() {
            if !seen.insert(column.as_str()) {
                return Err(Error::config(
                    format!("{path}.partition_by[{i}]"),
                    format!("column `{column}` is named twice"),
                ));
            }
        }
        Ok(())
    }
}

/// The `options` of a `delta` source node: a bounded read of one table version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeltaSourceOptions {
    /// The table's directory: a local path or a URL (`file:///abs/table`, `s3://bucket/table`).
    pub path: String,
    /// How to reach the server of an `s3://` path; unset fields come from the AWS environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3: Option<S3Options>,
    /// The table version to read (`scan.startup.version`); unset: the newest version when the
    /// job is prepared, fixed for the job's life so a restore reads the same rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
    /// Rows per batch read (default 8,192).
    #[serde(default = "default_batch_size")]
    pub batch_size: usize,
}

fn default_batch_size() -> usize {
    8192
}

impl DeltaSourceOptions {
    /// Checks what serde cannot.
    ///
    /// # Errors
    /// [`Error::Config`] naming the offending field below `path`.
    pub fn validate(&self, path: &str) -> Result<()> {
        check_location(&self.path, self.s3.as_ref(), path)?;
        if self.batch_size == 0 {
            return Err(Error::config(
                format!("{path}.batch_size"),
                "must be at least 1",
            ));
        }
        Ok(())
    }
}

/// Checks `path` (not empty) and its `s3` options (valid, and only with an `s3://` path).
fn check_location(given: &str, s3: Option<&S3Options>, options_path: &str) -> Result<()> {
    if given.trim().is_empty() {
        return Err(Error::config(
            format!("{options_path}.path"),
            "the path is empty",
        ));
    }
    weir_api::check_path_s3(given, s3, options_path)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;
    use weir_api::decode_options;

    #[test]
    fn sink_options_have_defaults_and_name_bad_fields() {
        let o: DeltaSinkOptions =
            decode_options(&json!({"path": "lake/bids"}), "sinks[0].options").unwrap();
        assert_eq!(o.target_file_size, DEFAULT_TARGET_FILE_SIZE);
        assert_eq!(o.checkpoint_interval, DEFAULT_CHECKPOINT_INTERVAL);
        assert_eq!(o.compaction_target(), DEFAULT_TARGET_FILE_SIZE);
        o.validate("sinks[0].options").unwrap();

        let err = decode_options::<DeltaSinkOptions>(
            &json!({"path": "x", "target_size": 1}),
            "sinks[0].options",
        )
        .unwrap_err();
        assert!(err.to_string().contains("target_size"), "{err}");

        let o: DeltaSinkOptions = decode_options(
            &json!({"path": "x", "partition_by": ["dt", "dt"]}),
            "sinks[0].options",
        )
        .unwrap();
        let err = o.validate("sinks[0].options").unwrap_err();
        assert!(
            matches!(&err, Error::Config { path, .. } if path == "sinks[0].options.partition_by[1]"),
            "{err}"
        );
        let o: DeltaSinkOptions = decode_options(
            &json!({"path": "x", "s3": {"region": "eu-west-1"}}),
            "sinks[0].options",
        )
        .unwrap();
        let err = o.validate("sinks[0].options").unwrap_err();
        assert!(err.to_string().contains("s3:// paths only"), "{err}");
    }

    #[test]
    fn source_options_check_the_batch_size() {
        let o: DeltaSourceOptions = decode_options(
            &json!({"path": "t", "version": 3, "batch_size": 0}),
            "sources[0].options",
        )
        .unwrap();
        assert_eq!(o.version, Some(3));
        let err = o.validate("sources[0].options").unwrap_err();
        assert!(
            matches!(&err, Error::Config { path, .. } if path == "sources[0].options.batch_size"),
            "{err}"
        );
    }
}
