//! Helpers shared by the crate's tests: preparing sources, reading splits, rendering rows.

use crate::FileSourceFactory;
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use std::sync::{Arc, LazyLock};
use weir_api::{
    BadRecordPolicy, ConnectorSpec, Error, OperatorId, PreparedSource, SourceFactory, SourceSplit,
    TaskContext,
};

static OPERATOR: LazyLock<OperatorId> = LazyLock::new(|| OperatorId::new("files"));

/// The options path tests pass, as the runtime would.
pub(crate) const OPTIONS_PATH: &str = "sources[0].options";

/// A task context for subtask `subtask`.
pub(crate) fn ctx(subtask: u32) -> TaskContext {
    TaskContext::new(
        "job".into(),
        "files".into(),
        weir_api::SubtaskIndex(subtask),
        2,
    )
}

/// A connector spec over `options`.
pub(crate) fn spec(
    options: &serde_json::Value,
    schema: Option<SchemaRef>,
    bad_records: BadRecordPolicy,
) -> ConnectorSpec<'_> {
    ConnectorSpec {
        operator_id: &OPERATOR,
        options,
        options_path: OPTIONS_PATH,
        schema,
        bad_records,
        reach: weir_api::Reach::Full,
    }
}

/// Prepares a source with the default factory (small blocks, to cross block boundaries).
pub(crate) async fn prepare(
    options: serde_json::Value,
    schema: Option<SchemaRef>,
    policy: BadRecordPolicy,
) -> Result<Arc<dyn PreparedSource>, Error> {
    FileSourceFactory::new()
        .with_block_bytes(7)
        .prepare(spec(&options, schema, policy))
        .await
}

/// What reading one split produced.
#[derive(Debug, Default)]
pub(crate) struct SplitRead {
    pub(crate) rows: Vec<String>,
    pub(crate) dead_letters: Vec<String>,
    pub(crate) cursors: Vec<u64>,
}

/// Reads `split` to the end.
pub(crate) async fn read_split(
    source: &Arc<dyn PreparedSource>,
    split: &SourceSplit,
) -> Result<SplitRead, Error> {
    let mut reader = source.open_split(split, &ctx(0)).await?;
    let mut read = SplitRead::default();
    while let Some(batch) = reader.next_batch().await? {
        assert_eq!(batch.data.schema(), source.schema());
        read.rows.extend(render(&batch.data));
        if let Some(dead) = &batch.dead_letters {
            read.dead_letters.extend(render(dead));
        }
        read.cursors.push(batch.cursor.next_record);
    }
    Ok(read)
}

/// Reads every split in order and returns all rows.
pub(crate) async fn read_all(source: &Arc<dyn PreparedSource>) -> Result<Vec<String>, Error> {
    let mut rows = Vec::new();
    for split in source.enumerate_splits().await? {
        rows.extend(read_split(source, &split).await?.rows);
    }
    Ok(rows)
}

/// Each row as its values joined by `|`, nulls as `∅`.
pub(crate) fn render(batch: &RecordBatch) -> Vec<String> {
    let options = FormatOptions::default().with_null("∅");
    let formatters: Vec<_> = batch
        .columns()
        .iter()
        .map(|c| ArrayFormatter::try_new(c.as_ref(), &options).expect("formatter"))
        .collect();
    (0..batch.num_rows())
        .map(|row| {
            formatters
                .iter()
                .map(|f| f.value(row).to_string())
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect()
}

/// Writes `contents` to `relative` under `dir`, creating directories.
pub(crate) fn write(dir: &std::path::Path, relative: &str, contents: impl AsRef<[u8]>) -> String {
    let path = dir.join(relative);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("create dirs");
    std::fs::write(&path, contents).expect("write");
    path.display().to_string()
}

/// Expects a bad-record error and returns (input, line, column, message).
pub(crate) fn bad_record(err: Error) -> (String, Option<u64>, Option<String>, String) {
    match err {
        Error::BadRecord { location, message } => {
            (location.input, location.line, location.column, message)
        }
        other => panic!("expected a bad record error, got {other}"),
    }
}
