//! Weir's file connector: a bounded source of CSV, JSON-lines and Parquet files and a sink that
//! writes rolling part files, both over the local file system or any [`object_store`].
//!
//! This crate owns the `file` source and sink. It depends on `weir-api` only (never on the
//! runtime or the planner), and the runtime knows no connector: whoever assembles the registry
//! registers [`FileSourceFactory`] and [`FileSinkFactory`] under the connector name `file`, as
//! the `weir` facade's `default_registry()` does (both with one object store registry).
//!
//! - **Source**: `path` is a file, a directory, a glob (`data/*.csv`, `data/**/*.json`) or a URL
//!   (`file:///abs/dir/`, `memory:///x/`, `s3://bucket/dir/` with the `s3` options of
//!   [`weir_api::S3Options`]). One split per file, sorted by path; a split's cursor
//!   is the number of data records already read, so a restored reader resumes exactly. The
//!   schema is declared or inferred. Bad records fail the job with file, line and column, or go
//!   to the dead-letter output ([`weir_api::BadRecordPolicy`]); the fast path stays vectorized
//!   and only a chunk with a bad record is decoded again to locate it.
//! - **Sink**: each subtask writes `part-{subtask:05}-{seq:05}-{unique}.{ext}` files into one
//!   directory, each published atomically: readers never see a partial file. Files roll by
//!   rows, size and age (Flink's rolling policy); with checkpoints and `auto_compaction` the
//!   small files of short epochs are merged before they are published (`compaction`).
//!
//! Reading a CSV file through the plugin surface:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> weir_api::Result<()> {
//! use weir_api::{Reach, BadRecordPolicy, ConnectorSpec, OperatorId, SourceFactory, TaskContext};
//! use weir_file::FileSourceFactory;
//!
//! let dir = tempfile::tempdir().expect("temp dir");
//! std::fs::write(dir.path().join("bids.csv"), "id,price\n1,9.5\n2,7.25\n").expect("write");
//! let options = serde_json::json!({ "path": format!("{}/*.csv", dir.path().display()) });
//! let source = FileSourceFactory::new()
//!     .prepare(ConnectorSpec {
//!         operator_id: &OperatorId::new("bids"),
//!         options: &options,
//!         options_path: "sources[0].options",
//!         schema: None,
//!         bad_records: BadRecordPolicy::Fail,
//!         reach: Reach::Full,
//!     })
//!     .await?;
//! let splits = source.enumerate_splits().await?;
//! let ctx = TaskContext::new("job".into(), "bids".into(), Default::default(), 1);
//! let mut reader = source.open_split(&splits[0], &ctx).await?;
//! let batch = reader.next_batch().await?.expect("one batch");
//! assert_eq!(batch.data.num_rows(), 2);
//! assert_eq!(batch.cursor.next_record, 2);
//! assert!(reader.next_batch().await?.is_none());
//! # Ok(())
//! # }
//! ```

mod carry;
mod compaction;
mod csv_reader;
mod csv_record;
mod csv_unquoted;
mod envelope;
mod epoch;
mod epoch_commit;
mod inference;
mod json_flat;
mod json_reader;
mod location;
mod object_bytes;
mod options;
mod parquet_prune;
mod parquet_reader;
mod part_file;
mod partition;
mod partition_commit;
#[cfg(test)]
mod partition_tests;
#[cfg(test)]
mod projection_tests;
#[cfg(test)]
mod prune_tests;
mod rejection;
mod rolling;
mod sink;
mod sink_writer;
mod source;
#[cfg(test)]
mod split_tests;
#[cfg(test)]
mod test_support;
mod text_numbers;

pub use envelope::Envelope;
pub use options::{
    DEFAULT_BATCH_SIZE, DEFAULT_BYTES_PER_FILE, DEFAULT_MAX_OPEN_PARTITIONS, DEFAULT_ROWS_PER_FILE,
    FileFormat, FileSinkOptions, FileSourceOptions, ParquetCompression,
};
pub use parquet_reader::ObjectParquetReader;
pub use partition::{DEFAULT_PARTITION, escape, unescape};
pub use partition_commit::{CommitPolicy, CommitTrigger, DEFAULT_SUCCESS_FILE};
pub use rolling::{DEFAULT_ROLLOVER_INTERVAL, parse_size};
pub use sink::FileSinkFactory;
pub use source::FileSourceFactory;
