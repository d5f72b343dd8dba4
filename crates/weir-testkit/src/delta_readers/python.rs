//! The Python `deltalake` reader (delta-rs): [`PYTHON_PACKAGES`] in a virtual environment under
//! [`cache_dir`]`("delta-python")`, running `python_read.py`.

use super::{DeltaRead, DeltaStorage, Result, install_venv, parse_read, run_script};
use crate::cache_dir;
use crate::error::TestkitError;
use serde_json::{Map, Value, json};
use std::path::PathBuf;

/// The Python packages of the reader, pinned: `deltalake` and the `pyarrow` it reads into.
pub const PYTHON_PACKAGES: [&str; 2] = ["deltalake==1.6.6", "pyarrow==26.0.1"];

/// The reader's script (with `common.py` before it).
const SCRIPT: &str = include_str!("python_read.py");

/// The reader's virtual environment, installed on first use.
fn venv() -> Result<PathBuf> {
    install_venv(
        &cache_dir("delta-python"),
        &PYTHON_PACKAGES,
        "Python deltalake",
    )
}

/// Runs the script in `mode` on `table_uri` with `args`.
fn run(mode: &str, table_uri: &str, args: &Value, storage: &DeltaStorage) -> Result<Value> {
    let venv = venv()?;
    let options = Value::Object(storage.python_options()).to_string();
    run_script(
        &venv,
        SCRIPT,
        &[mode, table_uri, &args.to_string()],
        &[("WEIR_DELTA_STORAGE", options)],
        &format!("the Python deltalake reader ({mode} {table_uri})"),
    )
}

/// Reads version `version` (the latest when `None`) of the table at `table_uri` (a local path,
/// `file://` or `s3://bucket/path` URI) with `deltalake.DeltaTable(..., version=...)`.
///
/// # Errors
/// A NOT RUN error when Python cannot be had; [`TestkitError::Command`] when the installation
/// or the read fails (a missing table or version among them), with the end of the output.
pub fn delta_python_rows(
    table_uri: &str,
    version: Option<u64>,
    storage: &DeltaStorage,
) -> Result<DeltaRead> {
    let value = run("read", table_uri, &json!({ "version": version }), storage)?;
    parse_read(&value, "the Python deltalake reader")
}

/// The versions of a table and the application transactions in its latest snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct DeltaHistory {
    /// The latest version.
    pub version: u64,
    /// Every commit still in the log, oldest first.
    pub commits: Vec<DeltaCommit>,
    /// The `txn` actions of the application ids asked for: the last version each committed
    /// (`DeltaTable.transaction_version(app_id)`); an id that never committed is absent.
    pub app_transactions: Map<String, Value>,
}

impl DeltaHistory {
    /// The versions of the commits, oldest first.
    pub fn versions(&self) -> Vec<u64> {
        self.commits.iter().map(|c| c.version).collect()
    }

    /// The last version application `app_id` committed, if it did.
    pub fn app_version(&self, app_id: &str) -> Option<u64> {
        self.app_transactions.get(app_id).and_then(Value::as_u64)
    }
}

/// One commit of a table's history.
#[derive(Debug, Clone, PartialEq)]
pub struct DeltaCommit {
    /// Its version.
    pub version: u64,
    /// Its operation (`WRITE`, `CREATE TABLE`, ...), as the writer named it.
    pub operation: Option<String>,
    /// Its commit time in milliseconds since the epoch, when recorded.
    pub timestamp: Option<i64>,
}

/// The history (`DeltaTable.history()`) of the table at `table_uri` and the application
/// transactions (`txn`) of `app_ids` in its latest snapshot (`DeltaTable.transaction_version`:
/// deltalake 1.x answers per id and cannot list them).
///
/// # Errors
/// As [`delta_python_rows`].
pub fn delta_python_history(
    table_uri: &str,
    app_ids: &[&str],
    storage: &DeltaStorage,
) -> Result<DeltaHistory> {
    let value = run(
        "history",
        table_uri,
        &json!({ "app_ids": app_ids }),
        storage,
    )?;
    let bad = |detail: &str| TestkitError::Command {
        command: "the Python deltalake reader (history)".into(),
        status: "exit status: 0".into(),
        output: format!("unexpected output: {detail}: {value}"),
    };
    let commits = value["commits"]
        .as_array()
        .ok_or_else(|| bad("no commit list"))?
        .iter()
        .map(|c| {
            Ok(DeltaCommit {
                version: c["version"]
                    .as_u64()
                    .ok_or_else(|| bad("a commit without a version"))?,
                operation: c["operation"].as_str().map(str::to_owned),
                timestamp: c["timestamp"].as_i64(),
            })
        })
        .collect::<Result<_>>()?;
    Ok(DeltaHistory {
        version: value["version"].as_u64().ok_or_else(|| bad("no version"))?,
        commits,
        app_transactions: value["app_transactions"]
            .as_object()
            .cloned()
            .unwrap_or_default(),
    })
}

/// A write with `deltalake.write_deltalake`, for tests that make a table for a reader or for
/// Weir to append to.
#[derive(Debug, Clone, Default)]
pub struct DeltaWrite<'a> {
    /// The rows, as JSON objects.
    pub rows: Vec<Value>,
    /// The columns and their Arrow types (`int64`, `string`, `double`, `bool`, `date32`,
    /// `timestamp[us, tz=UTC]`, `timestamp[us]`, `decimal128(10,2)`); timestamps, dates and
    /// decimals are given as strings. Empty: inferred by pyarrow from the rows.
    pub schema: Vec<(&'a str, &'a str)>,
    /// The partition columns.
    pub partition_by: Vec<&'a str>,
    /// `"append"` (the default when empty), `"overwrite"`, `"error"` or `"ignore"`.
    pub mode: &'a str,
    /// An application transaction (`txn` action) to commit with the write: id and version.
    pub app_transaction: Option<(&'a str, u64)>,
}

/// Writes `write` to the table at `table_uri` (created when missing) and returns the table's
/// new version. On S3 the commit uses a conditional put (`conditional_put=etag`).
///
/// # Errors
/// As [`delta_python_rows`].
pub fn delta_python_write(
    table_uri: &str,
    write: &DeltaWrite<'_>,
    storage: &DeltaStorage,
) -> Result<u64> {
    let args = json!({
        "rows": write.rows,
        "schema": write.schema,
        "partition_by": write.partition_by,
        "mode": if write.mode.is_empty() { "append" } else { write.mode },
        "app_id": write.app_transaction.map(|t| t.0),
        "app_version": write.app_transaction.map(|t| t.1),
    });
    let value = run("write", table_uri, &args, storage)?;
    value["version"]
        .as_u64()
        .ok_or_else(|| TestkitError::Command {
            command: "the Python deltalake writer".into(),
            status: "exit status: 0".into(),
            output: format!("unexpected output: {value}"),
        })
}
