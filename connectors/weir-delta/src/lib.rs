//! Weir's Delta Lake connector, on delta-rs (`deltalake-core`): an exactly-once sink that
//! makes each checkpoint epoch of all its subtasks one Delta commit, and a bounded source that
//! reads one version of a table.
//!
//! - **Sink** (`delta`): subtasks write Parquet data files into the table's directory (and its
//!   `key=value/` partition directories); no reader sees them until a commit names them. At
//!   each checkpoint every subtask hands its files' `add` actions to the checkpoint; once the
//!   checkpoint is durable the epoch is committed as one Delta commit that carries the
//!   transaction `txn {appId: weir-{job}-{sink}, version: epoch}`, so a commit repeated after a
//!   crash is recognised and passed over. In the lanes of a distributed job, each lane stages
//!   its durable epochs and one commit holds a round of every lane's epochs (`lanes`). The
//!   table is created from the sink's columns when missing. Optionally, small files of
//!   committed epochs are merged (`auto_compaction`).
//! - **Source** (`delta`): one split per data file of the version read, partition columns
//!   restored from the files' partition values; a split's cursor is the rows already read.
//!
//! Like every connector it depends on `weir-api` only; the `weir` facade registers
//! [`DeltaSinkFactory`] and [`DeltaSourceFactory`] under the connector name `delta`.

mod commit;
mod compaction;
mod lanes;
mod options;
mod schema;
mod sink;
mod source;
mod table;

pub use options::{
    DEFAULT_CHECKPOINT_INTERVAL, DEFAULT_TARGET_FILE_SIZE, DeltaSinkOptions, DeltaSourceOptions,
};
pub use sink::DeltaSinkFactory;
pub use source::DeltaSourceFactory;

#[cfg(test)]
mod lanes_tests;
#[cfg(test)]
mod tests;
/// Real Delta readers (Python deltalake, Spark) over tables Weir wrote; in the full tier.
#[cfg(test)]
mod full {
    mod reader_tests;
}
