//! The typed `options` objects of the file source and sink, decoded with
//! [`weir_api::decode_options`] so that every error names the JSON path of the offending field.

use serde::{Deserialize, Serialize};
use weir_api::{Error, Result, S3Options};

/// Rows per batch when `batch_size` is not set: large enough to amortise per-batch overhead,
/// small enough to keep a batch of wide rows in a few megabytes.
pub const DEFAULT_BATCH_SIZE: usize = 8192;

/// Bytes per split of CSV and JSON lines when `split_size` is not set: a file larger than this
/// is read as several byte ranges, decoded side by side (shared among the source's subtasks, or,
/// with a watermark, decoded ahead and handed on in order by one subtask).
pub const DEFAULT_SPLIT_SIZE: u64 = 16 * 1024 * 1024;

/// Bytes per split of Parquet when `split_size` is not set: row groups are gathered until a
/// split holds this much. Smaller than for text: chosen when subtasks read the splits of one
/// file side by side, far apart in event time (docs/connectors/file.md); it also bounds what a
/// decoder reads ahead of a file read as one stream.
pub const DEFAULT_PARQUET_SPLIT_SIZE: u64 = 4 * 1024 * 1024;

/// Rows per part file when `rows_per_file` is not set.
pub const DEFAULT_ROWS_PER_FILE: u64 = 1_000_000;

/// Bytes per part file when `bytes_per_file` is not set (256 MiB: few, large files suit both
/// object stores and query engines).
pub const DEFAULT_BYTES_PER_FILE: u64 = 256 * 1024 * 1024;

/// A file format the connector reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FileFormat {
    /// Comma (or `delimiter`) separated values, RFC 4180 quoting.
    Csv,
    /// JSON lines: one JSON object per line.
    #[serde(alias = "jsonl", alias = "ndjson")]
    Json,
    /// Apache Parquet.
    Parquet,
}

impl FileFormat {
    /// The format a file name's extension stands for (`.csv`, `.json`/`.jsonl`/`.ndjson`,
    /// `.parquet`/`.pq`), case-insensitively; `None` for anything else.
    pub fn from_extension(name: &str) -> Option<Self> {
        let file = name.rsplit('/').next().unwrap_or(name);
        let (_, ext) = file.rsplit_once('.')?;
        match ext.to_ascii_lowercase().as_str() {
            "csv" => Some(Self::Csv),
            "json" | "jsonl" | "ndjson" => Some(Self::Json),
            "parquet" | "pq" => Some(Self::Parquet),
            _ => None,
        }
    }

    /// The extension the sink gives its part files.
    pub fn extension(self) -> &'static str {
        match self {
            Self::Csv => "csv",
            Self::Json => "json",
            Self::Parquet => "parquet",
        }
    }
}

impl std::fmt::Display for FileFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Csv => "csv",
            Self::Json => "json",
            Self::Parquet => "parquet",
        })
    }
}

/// The `options` of a `file` source node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSourceOptions {
    /// What to read: a file, a directory (read recursively, skipping names that start with `.`
    /// or `_`), a glob (`data/*.csv`, `data/**/*.json`) or an object-store URL
    /// (`file:///abs/dir/`, `memory:///x/*.csv`, `s3://bucket/dir/*.parquet`). Relative paths
    /// are relative to the current directory.
    pub path: String,
    /// How to reach the server of an `s3://` path (endpoint, region, credentials, path style);
    /// unset fields come from the AWS environment variables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3: Option<S3Options>,
    /// The format; inferred from the file extensions when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<FileFormat>,
    /// Rows per emitted batch (default 8192).
    #[serde(default = "default_batch_size")]
    pub batch_size: usize,
    /// Bytes per split (default 16 MiB for CSV and JSON lines, 4 MiB for Parquet): a larger
    /// file is cut into splits read by different subtasks, at line starts for CSV and JSON
    /// lines, at row groups for Parquet. 0 reads each file as one split (for CSV files whose
    /// quoted fields hold line breaks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_size: Option<u64>,
    /// CSV only: the field delimiter, one ASCII character (default `,`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delimiter: Option<char>,
    /// CSV only: whether the first record of each file is a header (default `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_header: Option<bool>,
    /// CSV and JSON lines: the most text a reader holds while it looks for the end of a batch's
    /// records (default 256 MiB); a record that does not fit (a 1 GB field) fails the read,
    /// naming the file and the byte offset, instead of taking the memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_buffer_bytes: Option<u64>,
    /// The partition columns: their values come from the Hive-style `column=value` directories
    /// of each file, typed by the schema, not from the files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partition_by: Vec<String>,
}

/// Bytes of text a CSV or JSON-lines reader holds at most when `max_buffer_bytes` is not set.
pub const DEFAULT_MAX_BUFFER_BYTES: u64 = 256 << 20;

fn default_batch_size() -> usize {
    DEFAULT_BATCH_SIZE
}

/// The bytes per split of `format` when the options do not set `split_size`.
pub fn default_split_size(format: FileFormat) -> u64 {
    match format {
        FileFormat::Parquet => DEFAULT_PARQUET_SPLIT_SIZE,
        FileFormat::Csv | FileFormat::Json => DEFAULT_SPLIT_SIZE,
    }
}

impl FileSourceOptions {
    /// Checks the value ranges serde cannot, and that CSV-only options come with CSV.
    ///
    /// `format` is the explicit or inferred format; `path` is the JSON path of the options.
    ///
    /// # Errors
    /// [`Error::Config`] naming the offending field.
    pub(crate) fn validate(&self, format: FileFormat, path: &str) -> Result<CsvSettings> {
        check_s3(&self.path, self.s3.as_ref(), path)?;
        if self.batch_size == 0 {
            return Err(Error::config(
                format!("{path}.batch_size"),
                "must be at least 1",
            ));
        }
        if self.max_buffer_bytes == Some(0) {
            return Err(Error::config(
                format!("{path}.max_buffer_bytes"),
                "must be at least 1",
            ));
        }
        if format != FileFormat::Csv {
            for (name, given) in [
                ("delimiter", self.delimiter.is_some()),
                ("has_header", self.has_header.is_some()),
            ] {
                if given {
                    return Err(Error::config(
                        format!("{path}.{name}"),
                        format!("`{name}` applies to csv only, but the format is {format}"),
                    ));
                }
            }
        }
        let delimiter = self.delimiter.unwrap_or(',');
        if !delimiter.is_ascii() || matches!(delimiter, '"' | '\n' | '\r') {
            return Err(Error::config(
                format!("{path}.delimiter"),
                format!(
                    "{delimiter:?} cannot be a delimiter: use one ASCII character other than a quote or line break"
                ),
            ));
        }
        Ok(CsvSettings {
            delimiter: delimiter as u8,
            has_header: self.has_header.unwrap_or(true),
        })
    }
}

/// The resolved CSV settings of a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CsvSettings {
    pub(crate) delimiter: u8,
    pub(crate) has_header: bool,
}

/// Parquet compression codec of the sink's files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ParquetCompression {
    /// Snappy: fast, moderate ratio (the default).
    #[default]
    Snappy,
    /// Zstandard at its default level: better ratio, a little slower.
    Zstd,
    /// No compression.
    Uncompressed,
}

/// The `options` of a `file` sink node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSinkOptions {
    /// The directory that receives the part files: a local path or an object-store URL
    /// (`file:///abs/dir/`, `s3://bucket/dir/`).
    pub path: String,
    /// How to reach the server of an `s3://` path (endpoint, region, credentials, path style);
    /// unset fields come from the AWS environment variables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3: Option<S3Options>,
    /// The format of the part files.
    pub format: FileFormat,
    /// A part file is published once it holds this many rows (default 1,000,000).
    #[serde(default = "default_rows_per_file")]
    pub rows_per_file: u64,
    /// A part file is published once it holds about this many bytes (default 256 MiB); checked
    /// after each batch, so a file may exceed it by one batch. A number of bytes or a size such
    /// as `"128MB"` (SQL: `sink.bytes-per-file` or Flink's `sink.rolling-policy.file-size`).
    #[serde(
        default = "default_bytes_per_file",
        deserialize_with = "crate::rolling::de_size"
    )]
    pub bytes_per_file: u64,
    /// A part file is published once it has been open this long (checked when a batch arrives);
    /// with `auto_compaction`, also the longest small files wait to be merged. Default 30 min.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollover_interval: Option<weir_api::DurationMs>,
    /// With checkpoints, Parquet only: small files of finished epochs stay staged and are merged
    /// into one file once they reach `compaction_file_size` or `rollover_interval` passes
    /// (docs/connectors/file.md, "Rolling and compaction").
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub auto_compaction: bool,
    /// The size merged files aim at (default `bytes_per_file`); a number of bytes or `"128MB"`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::rolling::de_opt_size"
    )]
    pub compaction_file_size: Option<u64>,
    /// Parquet only: the compression codec (default `snappy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<ParquetCompression>,
    /// JSON only: write each row with its kind in a changelog envelope (`debezium` or
    /// `changelog`), which lets the sink take an updating stream. Unset: rows are written as
    /// they are, and an updating input is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub envelope: Option<crate::envelope::Envelope>,
    /// The partition columns: rows go to Hive-style directories `column=value/...` below
    /// `path`, and these columns are not written into the files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partition_by: Vec<String>,
    /// The most partitions a writer keeps a part file open for (default 100); past it the least
    /// recently written one is completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_open_partitions: Option<usize>,
    /// How a complete partition is committed (`success-file`); unset: partitions are not
    /// committed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_commit_policy: Option<crate::partition_commit::CommitPolicy>,
    /// When a partition is complete: `process-time` (default) or `partition-time`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_commit_trigger: Option<crate::partition_commit::CommitTrigger>,
    /// How long after its time (or its first row) a partition is committed (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_commit_delay: Option<weir_api::DurationMs>,
    /// The success file's name (default `_SUCCESS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_success_file_name: Option<String>,
    /// How a partition's time is built from its values, e.g. `$dt $hour:00:00` (default: the
    /// first partition column's value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_time_pattern: Option<String>,
}

/// Partitions a sink writer keeps a part file open for when `max_open_partitions` is unset.
pub const DEFAULT_MAX_OPEN_PARTITIONS: usize = 100;

fn default_rows_per_file() -> u64 {
    DEFAULT_ROWS_PER_FILE
}

fn default_bytes_per_file() -> u64 {
    DEFAULT_BYTES_PER_FILE
}

impl FileSinkOptions {
    /// Checks the value ranges serde cannot, and that `compression` comes with Parquet.
    ///
    /// # Errors
    /// [`Error::Config`] naming the offending field.
    pub(crate) fn validate(&self, path: &str) -> Result<()> {
        check_s3(&self.path, self.s3.as_ref(), path)?;
        if self.rows_per_file == 0 {
            return Err(Error::config(
                format!("{path}.rows_per_file"),
                "must be at least 1",
            ));
        }
        if self.bytes_per_file == 0 {
            return Err(Error::config(
                format!("{path}.bytes_per_file"),
                "must be at least 1",
            ));
        }
        validate_compaction(self, path)?;
        if let Some(envelope) = self.envelope
            && self.format != FileFormat::Json
        {
            return Err(Error::config(
                format!("{path}.envelope"),
                format!(
                    "a changelog envelope ({}) is written as JSON lines, but the format is {}",
                    envelope.sql_name(),
                    self.format
                ),
            ));
        }
        self.validate_partitions(path)?;
        if self.compression.is_some() && self.format != FileFormat::Parquet {
            return Err(Error::config(
                format!("{path}.compression"),
                format!(
                    "`compression` applies to parquet only, but the format is {}",
                    self.format
                ),
            ));
        }
        Ok(())
    }
}

impl FileSinkOptions {
    /// Checks the partition options: commit options need partitions and a commit policy, and
    /// a changelog envelope cannot be partitioned.
    fn validate_partitions(&self, path: &str) -> Result<()> {
        if self.max_open_partitions == Some(0) {
            return Err(Error::config(
                format!("{path}.max_open_partitions"),
                "must be at least 1",
            ));
        }
        if !self.partition_by.is_empty()
            && let Some(envelope) = self.envelope
        {
            return Err(Error::config(
                format!("{path}.partition_by"),
                format!(
                    "a changelog envelope ({}) cannot be written to partitions",
                    envelope.sql_name()
                ),
            ));
        }
        let commit_options = [
            (
                "partition_commit_policy",
                self.partition_commit_policy.is_some(),
            ),
            (
                "partition_commit_trigger",
                self.partition_commit_trigger.is_some(),
            ),
            (
                "partition_commit_delay",
                self.partition_commit_delay.is_some(),
            ),
            (
                "partition_success_file_name",
                self.partition_success_file_name.is_some(),
            ),
            (
                "partition_time_pattern",
                self.partition_time_pattern.is_some(),
            ),
        ];
        for (name, given) in commit_options {
            if given && self.partition_by.is_empty() {
                return Err(Error::config(
                    format!("{path}.{name}"),
                    format!("`{name}` applies to a partitioned sink; set `partition_by`"),
                ));
            }
            if given && self.partition_commit_policy.is_none() {
                return Err(Error::config(
                    format!("{path}.{name}"),
                    format!(
                        "`{name}` applies when partitions are committed; set \
                         `partition_commit_policy` (success-file)"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Checks the `s3` options of `options_path`: valid, and only with an `s3://` path.
pub(crate) fn check_s3(given: &str, s3: Option<&S3Options>, options_path: &str) -> Result<()> {
    weir_api::check_path_s3(given, s3, options_path)
}

/// Checks the compaction and rolling options of a sink whose options are at `path`.
///
/// # Errors
/// [`Error::Config`] naming the offending field.
fn validate_compaction(options: &FileSinkOptions, path: &str) -> Result<()> {
    if options.rollover_interval == Some(weir_api::DurationMs(0)) {
        return Err(Error::config(
            format!("{path}.rollover_interval"),
            "must be at least 1ms",
        ));
    }
    if options.compaction_file_size == Some(0) {
        return Err(Error::config(
            format!("{path}.compaction_file_size"),
            "must be at least 1 byte",
        ));
    }
    if options.compaction_file_size.is_some() && !options.auto_compaction {
        return Err(Error::config(
            format!("{path}.compaction_file_size"),
            "applies with `auto_compaction: true` (SQL 'auto-compaction' = 'true') only",
        ));
    }
    if options.auto_compaction && !options.partition_by.is_empty() {
        return Err(Error::config(
            format!("{path}.auto_compaction"),
            "compaction merges the files of an unpartitioned sink only; drop `partition_by` \
             (PARTITIONED BY) or `auto_compaction`",
        ));
    }
    if options.auto_compaction && options.format != FileFormat::Parquet {
        return Err(Error::config(
            format!("{path}.auto_compaction"),
            format!(
                "compaction merges Parquet files only, but the format is {}",
                options.format
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;
    use weir_api::decode_options;

    #[test]
    fn source_defaults_apply() {
        let opts: FileSourceOptions =
            decode_options(&json!({"path": "data/*.csv"}), "sources[0].options").unwrap();
        assert_eq!(opts.batch_size, DEFAULT_BATCH_SIZE);
        let csv = opts.validate(FileFormat::Csv, "x").unwrap();
        assert_eq!(
            csv,
            CsvSettings {
                delimiter: b',',
                has_header: true
            }
        );
    }

    #[test]
    fn unknown_source_field_names_its_path() {
        let err = decode_options::<FileSourceOptions>(
            &json!({"path": "a", "fromat": "csv"}),
            "sources[0].options",
        )
        .unwrap_err();
        assert!(err.to_string().contains("sources[0].options"), "{err}");
        assert!(err.to_string().contains("fromat"), "{err}");
    }

    #[test]
    fn csv_options_with_json_are_rejected() {
        let opts: FileSourceOptions =
            decode_options(&json!({"path": "a.json", "delimiter": ";"}), "s").unwrap();
        let err = opts.validate(FileFormat::Json, "s").unwrap_err();
        assert!(matches!(err, Error::Config { ref path, .. } if path == "s.delimiter"));
    }

    #[test]
    fn extension_inference() {
        assert_eq!(FileFormat::from_extension("x/y.CSV"), Some(FileFormat::Csv));
        assert_eq!(
            FileFormat::from_extension("y.ndjson"),
            Some(FileFormat::Json)
        );
        assert_eq!(
            FileFormat::from_extension("y.pq"),
            Some(FileFormat::Parquet)
        );
        assert_eq!(FileFormat::from_extension("dir.d/file"), None);
        assert_eq!(FileFormat::from_extension("data/*"), None);
    }

    #[test]
    fn sink_validation_names_fields() {
        let opts: FileSinkOptions = decode_options(
            &json!({"path": "out", "format": "csv", "compression": "zstd"}),
            "sinks[0].options",
        )
        .unwrap();
        let err = opts.validate("sinks[0].options").unwrap_err();
        assert!(
            matches!(err, Error::Config { ref path, .. } if path == "sinks[0].options.compression")
        );
        let err = decode_options::<FileSinkOptions>(&json!({"path": "out"}), "sinks[0].options")
            .unwrap_err();
        assert!(err.to_string().contains("format"), "{err}");
    }

    #[test]
    fn s3_options_need_an_s3_path_and_name_their_field() {
        let opts: FileSinkOptions = decode_options(
            &json!({"path": "out", "format": "csv", "s3": {"region": "eu-west-1"}}),
            "sinks[0].options",
        )
        .unwrap();
        let err = opts.validate("sinks[0].options").unwrap_err();
        assert!(matches!(err, Error::Config { ref path, .. } if path == "sinks[0].options.s3"));
        let opts: FileSourceOptions = decode_options(
            &json!({"path": "s3://b/in/*.csv", "s3": {"access_key_id": "k"}}),
            "sources[0].options",
        )
        .unwrap();
        let err = opts
            .validate(FileFormat::Csv, "sources[0].options")
            .unwrap_err();
        assert!(
            matches!(err, Error::Config { ref path, .. } if path == "sources[0].options.s3.secret_access_key"),
            "{err}"
        );
        let err = decode_options::<FileSinkOptions>(
            &json!({"path": "s3://b/o", "format": "csv", "s3": {"endpont": "http://x"}}),
            "sinks[0].options",
        )
        .unwrap_err();
        assert!(err.to_string().contains("sinks[0].options.s3"), "{err}");
        assert!(err.to_string().contains("endpont"), "{err}");
    }
}
