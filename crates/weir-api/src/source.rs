//! The source surface: an enumerator lists splits, readers read them from a cursor.

use crate::capability::{Boundedness, SourceCapability};
use crate::context::TaskContext;
use crate::error::{RecordLocation, Result};
use crate::ids::OperatorId;
use crate::predicate::SourcePredicate;
use arrow::array::{ArrayRef, StringBuilder, UInt64Builder};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, LazyLock};

/// What a connector does with a record it cannot read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BadRecordPolicy {
    /// Fail the job with an error naming file, line and column.
    #[default]
    Fail,
    /// Send the record with the reason to the node's `dead_letter` output.
    DeadLetter,
}

/// What preparing a connector may reach beyond its options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reach {
    /// Everything the connector needs: files and object stores listed, schemas inferred,
    /// brokers asked (`weir run`, `weir validate`, a lane on an Agent).
    #[default]
    Full,
    /// Nothing outside this process: options, declared schemas and formats only. What the Hub
    /// validates a distributed job with, on a machine that is not the one the job reads from
    /// and on behalf of a request. A source that would have to read its input to know its
    /// schema or format refuses with a message that asks to declare it.
    Offline,
}

/// What a source or sink factory is given to prepare one connector node of a job.
#[derive(Debug, Clone)]
pub struct ConnectorSpec<'a> {
    /// The node's stable operator id.
    pub operator_id: &'a OperatorId,
    /// The node's `options` object from the job spec.
    pub options: &'a serde_json::Value,
    /// JSON path of `options` in the spec, for error messages (`sources[0].options`).
    pub options_path: &'a str,
    /// The schema declared in the spec, if any; otherwise a source infers it.
    pub schema: Option<SchemaRef>,
    /// What to do with unreadable records.
    pub bad_records: BadRecordPolicy,
    /// What preparing may reach: [`Reach::Offline`] touches no file, store or broker.
    pub reach: Reach,
}

/// Position inside a split: the next record to read (a row for files, an offset for logs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
pub struct SplitCursor {
    /// 0-based index of the next record to read.
    pub next_record: u64,
}

/// A unit of source input assigned to one reader: a file, a topic partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceSplit {
    /// Stable id of the split (a file's URL, `topic/partition`).
    pub id: String,
    /// Where reading starts.
    pub cursor: SplitCursor,
    /// Size in bytes where known, for progress reporting.
    pub size_bytes: Option<u64>,
    /// The part of one input this split covers when a source cuts an input into several
    /// splits (bytes of a text file, row groups of a Parquet file); `None`: the whole input.
    /// The source gives each part its own [`SourceSplit::id`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<SplitRange>,
}

/// A half-open range `[start, end)` inside one input, in units its source defines (bytes,
/// row groups).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SplitRange {
    /// First unit of the range.
    pub start: u64,
    /// One past the last unit.
    pub end: u64,
}

/// One read from a split.
#[derive(Debug, Clone)]
pub struct SplitBatch {
    /// Rows read, in the source's schema (may be empty when only dead letters were read).
    pub data: RecordBatch,
    /// Unreadable records, in [`dead_letter_schema`], when the policy is dead-letter.
    pub dead_letters: Option<RecordBatch>,
    /// The cursor after this batch.
    pub cursor: SplitCursor,
    /// Consumer lag: records between [`SplitBatch::cursor`] and the split's currently known end
    /// (for a log: its high watermark minus the next offset), `None` where the source does not
    /// know it. The runtime keeps the latest value per split and shows it in the job metrics.
    pub backlog: Option<u64>,
}

/// Reads one split from its cursor onwards.
///
/// # Cancel safety
/// A reader is dropped when its job is cancelled; `next_batch` need not be cancel safe.
#[async_trait::async_trait]
pub trait SplitReader: Send {
    /// The next batch, or `None` when a bounded split is exhausted.
    ///
    /// # Errors
    /// [`crate::Error::BadRecord`] under [`BadRecordPolicy::Fail`]; external errors for I/O.
    async fn next_batch(&mut self) -> Result<Option<SplitBatch>>;
}

/// A validated, schema-resolved source, shared by all its subtasks.
#[async_trait::async_trait]
pub trait PreparedSource: Send + Sync + std::fmt::Debug {
    /// Schema of the rows the source emits.
    fn schema(&self) -> SchemaRef;

    /// What the source can promise about replay.
    fn capabilities(&self) -> Vec<SourceCapability>;

    /// Whether the source ends by itself.
    fn boundedness(&self) -> Boundedness;

    /// One line for plan output, e.g. `file: csv data/*.csv`.
    fn describe(&self) -> String;

    /// The enumerator: lists every split, in a deterministic order.
    ///
    /// # Errors
    /// External errors when listing fails; a config error when nothing matches.
    async fn enumerate_splits(&self) -> Result<Vec<SourceSplit>>;

    /// Opens a reader for `split`, starting at its cursor.
    ///
    /// # Errors
    /// External errors when the split cannot be opened.
    async fn open_split(
        &self,
        split: &SourceSplit,
        ctx: &TaskContext,
    ) -> Result<Box<dyn SplitReader>>;

    /// Whether a source subtask opens all its splits at once and reads whichever has data
    /// (the partitions of a log, unbounded and read side by side), instead of reading them one
    /// after another in assignment order (files). Default: one after another.
    fn reads_splits_concurrently(&self) -> bool {
        false
    }

    /// Whether the splits, in enumeration order, are consecutive parts of one ordered input
    /// (a file source: its files in path order, each cut into ranges), so that a row's place in
    /// event time is its place in that order. With event-time watermarks the runtime then
    /// reads them as one stream: one subtask hands the rows on in enumeration order, with one
    /// watermark over all of them, while later splits are decoded ahead side by side. Default:
    /// `false` (each split is a stream of its own: a partition, a generator).
    fn splits_are_one_stream(&self) -> bool {
        false
    }

    /// The local paths and remote places this source reads (its files, object store prefix
    /// and endpoint, brokers), known without I/O, so that allow-lists are checked before it
    /// reads anything. Default: nothing (a generator).
    fn touches(&self) -> Vec<crate::Touch> {
        Vec::new()
    }

    /// How often each source subtask looks for new splits with
    /// [`PreparedSource::discover_splits`]; `None` (the default): never. Only sources that read
    /// their splits concurrently discover.
    fn discovery_interval(&self) -> Option<std::time::Duration> {
        None
    }

    /// Partition discovery: lists the splits as they are now. A split the job did not know at
    /// start and not discovered before is read, from the cursor returned here, by the one
    /// subtask `xxh64(id) % parallelism` of the source. Default: [`enumerate_splits`].
    ///
    /// # Errors
    /// External errors when listing fails.
    ///
    /// [`enumerate_splits`]: PreparedSource::enumerate_splits
    async fn discover_splits(&self) -> Result<Vec<SourceSplit>> {
        self.enumerate_splits().await
    }

    /// Projection pushdown: a copy of this source that reads only the columns `indices` of
    /// [`PreparedSource::schema`] (ascending, without repeats), so that it decodes no more
    /// than the job uses. Its schema must be `schema().project(indices)`. `None` (the default)
    /// when the source cannot narrow its reading; the runtime then drops the other columns
    /// after every read.
    fn project(&self, indices: &[usize]) -> Option<Arc<dyn PreparedSource>> {
        let _ = indices;
        None
    }

    /// Predicate pushdown: a copy of this source that may skip input in which no row can
    /// satisfy `predicate` (whose columns are columns of [`PreparedSource::schema`]), e.g.
    /// Parquet row groups whose statistics rule it out. Only an optimization: the job filters
    /// the rows after the source anyway, so the copy must emit every row that satisfies the
    /// predicate, may emit rows that do not, never changes a row, and keeps the schema, the
    /// split ids and the meaning of cursors (a cursor counts skipped records as read), so that
    /// a reader opened at a cursor of the unpruned source, or of one pruned with another
    /// predicate, resumes at the same place. `None` (the default): the source ignores the
    /// predicate. The runtime calls it before [`PreparedSource::project`], so the predicate's
    /// columns need not be among those read, and never for a source with event-time
    /// watermarks (a skipped row would not advance them).
    fn prune(&self, predicate: &SourcePredicate) -> Option<Arc<dyn PreparedSource>> {
        let _ = predicate;
        None
    }
}

/// Prepares sources of one connector type (`file`, `kafka`, `datagen`) from their options.
#[async_trait::async_trait]
pub trait SourceFactory: Send + Sync {
    /// Validates the options, resolves the schema (declared or inferred) and prepares the source.
    ///
    /// # Errors
    /// [`crate::Error::Config`] naming the offending option's path; external errors when
    /// inference has to read input and cannot.
    async fn prepare(&self, spec: ConnectorSpec<'_>) -> Result<Arc<dyn PreparedSource>>;
}

static DEAD_LETTER_SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("input", DataType::Utf8, false),
        Field::new("line", DataType::UInt64, true),
        Field::new("column", DataType::Utf8, true),
        Field::new("reason", DataType::Utf8, false),
        Field::new("raw", DataType::Utf8, true),
    ]))
});

/// Schema of every `dead_letter` output: where the record was, why it was rejected, its text.
pub fn dead_letter_schema() -> SchemaRef {
    DEAD_LETTER_SCHEMA.clone()
}

/// Builds a dead-letter batch one rejected record at a time (rejections are rare, so rows are fine
/// here).
#[derive(Debug, Default)]
pub struct DeadLetterBuilder {
    input: StringBuilder,
    line: UInt64Builder,
    column: StringBuilder,
    reason: StringBuilder,
    raw: StringBuilder,
    len: usize,
}

impl DeadLetterBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one rejected record.
    pub fn push(&mut self, location: &RecordLocation, reason: &str, raw: Option<&str>) {
        self.input.append_value(&location.input);
        self.line.append_option(location.line);
        self.column.append_option(location.column.as_deref());
        self.reason.append_value(reason);
        self.raw.append_option(raw);
        self.len += 1;
    }

    /// Number of records added.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no record was added.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The batch of everything added, or `None` when nothing was.
    pub fn finish(&mut self) -> Option<RecordBatch> {
        if self.len == 0 {
            return None;
        }
        self.len = 0;
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.input.finish()),
            Arc::new(self.line.finish()),
            Arc::new(self.column.finish()),
            Arc::new(self.reason.finish()),
            Arc::new(self.raw.finish()),
        ];
        RecordBatch::try_new(dead_letter_schema(), columns).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dead_letter_builder_builds_the_fixed_schema() {
        let mut b = DeadLetterBuilder::new();
        assert!(b.finish().is_none());
        b.push(
            &RecordLocation {
                input: "a.csv".into(),
                line: Some(3),
                column: Some("price".into()),
            },
            "not a number",
            Some("x,abc"),
        );
        let batch = b.finish().expect("one row");
        assert_eq!(batch.num_rows(), 1);
        assert_eq!(batch.schema(), dead_letter_schema());
        assert!(b.is_empty());
    }
}
