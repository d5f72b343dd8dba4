//! The SQL goldens: every `sql/*.slt` file is a [sqllogictest] script, run by the `sqllogictest`
//! crate's runner against [`WeirDb`], once at each parallelism it allows (1 and 4 unless it
//! says otherwise). docs/sql.md describes the statements a golden uses and how to add one.
//!
//! A Weir job is a whole script, not a session of single statements, so [`WeirDb`] reads each
//! record's SQL as one of:
//!
//! - `WRITE FILE <path>` and the file's lines: writes an input file;
//! - `PARALLELISM <n>...`: the parallelisms the file runs at (read by [`golden`] before the run;
//!   at run time it fails unless the run's parallelism is listed);
//! - `SELECT ...`: a query (planned by DataFusion) over the output of the last job: each sink's
//!   published Parquet rows, as a table named after its output directory, and
//!   `weir_operator_metrics` with one row per operator (`operator_id`, `kind`, `rows_in`,
//!   `rows_out`, `dropped`);
//! - anything else: a job script (`SET`, `CREATE TABLE`, `INSERT INTO`, ...), compiled with the
//!   golden's file name (errors name `<file>:<line>:<column>` within the record's SQL) and run
//!   to its end at the run's parallelism.
//!
//! [sqllogictest]: https://www.sqlite.org/sqllogictest/doc/trunk/about.wiki

use crate::support::read_sink_dir;
use sqllogictest::{DBOutput, DefaultColumnType, QueryExpect, Record, StatementExpect};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use weir::datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray, UInt64Array};
use weir::datafusion::arrow::datatypes::{DataType, Field, Schema};
use weir::datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use weir::datafusion::datasource::MemTable;
use weir::datafusion::prelude::SessionContext;
use weir::{Engine, JobSpec, RunSummary};

/// The substitution variable of the runner's per-file temporary directory.
pub(crate) const TEST_DIR: &str = "__TEST_DIR__";
/// Parallelisms of a golden without a `PARALLELISM` statement.
const DEFAULT_PARALLELISM: [u32; 2] = [1, 4];
/// The virtual table of per-operator counters of the last job.
const METRICS_TABLE: &str = "weir_operator_metrics";

/// What one record's SQL asks of [`WeirDb`].
pub(crate) enum Command<'a> {
    /// Write `content` to `path`.
    WriteFile { path: &'a str, content: String },
    /// The parallelisms the file runs at.
    Parallelism(Vec<u32>),
    /// A query over the last job's output.
    Query(&'a str),
    /// A job script.
    Job(&'a str),
}

impl<'a> Command<'a> {
    /// Reads a record's SQL.
    pub(crate) fn parse(sql: &'a str) -> Result<Self, SltError> {
        let trimmed = sql.trim_start();
        let (first, rest) = trimmed.split_once('\n').unwrap_or((trimmed, ""));
        let mut words = first.split_whitespace();
        let keyword = words.next().unwrap_or_default().to_ascii_uppercase();
        if keyword == "WRITE" && words.next().is_some_and(|w| w.eq_ignore_ascii_case("FILE")) {
            let path = words
                .next()
                .ok_or_else(|| SltError(format!("WRITE FILE without a path: `{first}`")))?;
            return Ok(Command::WriteFile {
                path,
                content: format!("{rest}\n"),
            });
        }
        if keyword == "PARALLELISM" {
            let list = words
                .map(|w| {
                    w.parse::<u32>()
                        .map_err(|_| SltError(format!("PARALLELISM: `{w}` is not a number")))
                })
                .collect::<Result<Vec<_>, _>>()?;
            if list.is_empty() {
                return Err(SltError("PARALLELISM lists no parallelism".into()));
            }
            return Ok(Command::Parallelism(list));
        }
        if keyword == "SELECT" {
            return Ok(Command::Query(sql));
        }
        Ok(Command::Job(sql))
    }
}

/// An error of a record, as the runner matches it against `statement error <regex>`.
#[derive(Debug)]
pub(crate) struct SltError(String);

impl std::fmt::Display for SltError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SltError {}

/// The last job [`WeirDb`] ran.
struct Ran {
    spec: JobSpec,
    summary: RunSummary,
}

/// A Weir engine behind the sqllogictest runner: one per golden file and parallelism.
pub(crate) struct WeirDb {
    engine: Engine,
    file: String,
    parallelism: u32,
    last: Option<Ran>,
}

impl WeirDb {
    /// An engine running the jobs of golden `file` at `parallelism`.
    pub(crate) fn new(file: &str, parallelism: u32) -> Self {
        WeirDb {
            engine: Engine::new(),
            file: file.to_owned(),
            parallelism,
            last: None,
        }
    }

    async fn job(&mut self, sql: &str) -> Result<(), SltError> {
        self.last = None;
        let job = self
            .engine
            .compile_sql(sql, &self.file)
            .await
            .map_err(|e| SltError(e.to_string()))?;
        let mut spec = job.spec;
        spec.parallelism = Some(self.parallelism);
        // As `weir run` reports it: a deep-build error at the script's line and column.
        let summary = self
            .engine
            .run(&spec, Some(&self.file))
            .await
            .map_err(|e| SltError(format!("{:#}", weir::locate_sql_error(e, &job.positions))))?;
        self.last = Some(Ran { spec, summary });
        Ok(())
    }

    async fn query(&self, sql: &str) -> Result<DBOutput<DefaultColumnType>, SltError> {
        let last = self
            .last
            .as_ref()
            .ok_or_else(|| SltError("a query before any job ran".into()))?;
        let ctx = SessionContext::new();
        let df_error = |e: weir::datafusion::error::DataFusionError| SltError(e.to_string());
        let mut registered = Vec::new();
        for sink in &last.spec.sinks {
            let Some(path) = sink.options.get("path").and_then(|p| p.as_str()) else {
                continue;
            };
            let Some(name) = Path::new(path).file_name().map(|n| n.to_string_lossy()) else {
                continue;
            };
            if registered.contains(&name) {
                continue;
            }
            let batches = read_sink_dir(Path::new(path));
            let schema = batches
                .first()
                .map(|b| b.schema())
                .unwrap_or_else(|| Arc::new(Schema::empty()));
            let table = MemTable::try_new(schema, vec![batches]).map_err(df_error)?;
            ctx.register_table(name.as_ref(), Arc::new(table))
                .map_err(df_error)?;
            registered.push(name);
        }
        let metrics = metrics_batch(&last.summary).map_err(|e| SltError(e.to_string()))?;
        let table = MemTable::try_new(metrics.schema(), vec![vec![metrics]]).map_err(df_error)?;
        ctx.register_table(METRICS_TABLE, Arc::new(table))
            .map_err(df_error)?;
        let frame = ctx.sql(sql).await.map_err(df_error)?;
        let schema = frame.schema().as_arrow().clone();
        let batches = frame.collect().await.map_err(df_error)?;
        rows(&schema, &batches)
    }
}

/// One row per operator of a job's final counters.
fn metrics_batch(
    summary: &RunSummary,
) -> Result<RecordBatch, weir::datafusion::arrow::error::ArrowError> {
    let operators = &summary.metrics.operators;
    let text = |f: fn(&weir::runtime::OperatorSnapshot) -> &str| -> ArrayRef {
        Arc::new(StringArray::from_iter_values(operators.iter().map(f)))
    };
    let count = |f: fn(&weir::runtime::OperatorSnapshot) -> u64| -> ArrayRef {
        Arc::new(UInt64Array::from_iter_values(operators.iter().map(f)))
    };
    let schema = Schema::new(vec![
        Field::new("operator_id", DataType::Utf8, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new("rows_in", DataType::UInt64, false),
        Field::new("rows_out", DataType::UInt64, false),
        Field::new("dropped", DataType::UInt64, false),
    ]);
    RecordBatch::try_new(
        Arc::new(schema),
        vec![
            text(|o| &o.operator_id),
            text(|o| o.kind),
            count(|o| o.rows_in),
            count(|o| o.rows_out),
            count(|o| o.dropped),
        ],
    )
}

/// Query output as the runner compares it: one string per cell, `NULL` for nulls and
/// `(empty)` for empty strings (the runner's comparison would lose an empty cell).
fn rows(schema: &Schema, batches: &[RecordBatch]) -> Result<DBOutput<DefaultColumnType>, SltError> {
    let options = FormatOptions::default().with_null("NULL");
    let types = schema
        .fields()
        .iter()
        .map(|f| column_type(f.data_type()))
        .collect();
    let mut out = Vec::new();
    for batch in batches {
        let formatters = batch
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| SltError(e.to_string()))?;
        for r in 0..batch.num_rows() {
            out.push(
                formatters
                    .iter()
                    .map(|f| match f.value(r).to_string() {
                        s if s.is_empty() => "(empty)".to_owned(),
                        s => s,
                    })
                    .collect(),
            );
        }
    }
    Ok(DBOutput::Rows { types, rows: out })
}

/// The sqllogictest column type of an Arrow type: `I` integers, `R` floating point and
/// decimals, `T` everything else.
fn column_type(data_type: &DataType) -> DefaultColumnType {
    if data_type.is_integer() {
        DefaultColumnType::Integer
    } else if data_type.is_floating()
        || matches!(
            data_type,
            DataType::Decimal128(..) | DataType::Decimal256(..)
        )
    {
        DefaultColumnType::FloatingPoint
    } else {
        DefaultColumnType::Text
    }
}

#[async_trait::async_trait]
impl sqllogictest::AsyncDB for WeirDb {
    type Error = SltError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, SltError> {
        match Command::parse(sql)? {
            Command::WriteFile { path, content } => {
                if !Path::new(path).is_absolute() {
                    return Err(SltError(format!(
                        "WRITE FILE {path}: not an absolute path (write ${TEST_DIR}/<name>)"
                    )));
                }
                std::fs::write(path, content)
                    .map_err(|e| SltError(format!("WRITE FILE {path}: {e}")))?;
                Ok(DBOutput::StatementComplete(0))
            }
            Command::Parallelism(list) => {
                if list.contains(&self.parallelism) {
                    Ok(DBOutput::StatementComplete(0))
                } else {
                    Err(SltError(format!(
                        "run at parallelism {}, which PARALLELISM {list:?} does not list",
                        self.parallelism
                    )))
                }
            }
            Command::Query(sql) => self.query(sql).await,
            Command::Job(sql) => {
                self.job(sql).await?;
                Ok(DBOutput::StatementComplete(0))
            }
        }
    }

    async fn shutdown(&mut self) {}

    fn engine_name(&self) -> &str {
        "weir"
    }

    async fn sleep(dur: std::time::Duration) {
        tokio::time::sleep(dur).await;
    }
}

/// A golden file's records, as the runner's parser reads them.
pub(crate) struct Golden {
    /// The parallelisms it runs at.
    pub(crate) parallelism: Vec<u32>,
    /// `WRITE FILE` statements: path (with `$__TEST_DIR__`) and content.
    pub(crate) inputs: Vec<(String, String)>,
    /// Job scripts expected to succeed.
    pub(crate) jobs: Vec<String>,
    /// Whether a job is expected to fail.
    pub(crate) fails: bool,
    /// Queries with expected rows.
    pub(crate) queries: usize,
}

/// Reads golden `path` with the sqllogictest parser.
pub(crate) fn golden(path: &Path) -> Golden {
    let records = sqllogictest::parse_file::<DefaultColumnType>(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut golden = Golden {
        parallelism: Vec::new(),
        inputs: Vec::new(),
        jobs: Vec::new(),
        fails: false,
        queries: 0,
    };
    for record in records {
        match record {
            Record::Statement { sql, expected, .. } => {
                let command =
                    Command::parse(&sql).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                match command {
                    Command::WriteFile { path, content } => {
                        golden.inputs.push((path.to_owned(), content));
                    }
                    Command::Parallelism(list) => golden.parallelism = list,
                    Command::Query(_) => {}
                    Command::Job(sql) => match expected {
                        StatementExpect::Error(_) => golden.fails = true,
                        _ => golden.jobs.push(sql.to_owned()),
                    },
                }
            }
            Record::Query {
                expected: QueryExpect::Results { .. },
                ..
            } => golden.queries += 1,
            _ => {}
        }
    }
    if golden.parallelism.is_empty() {
        golden.parallelism = DEFAULT_PARALLELISM.to_vec();
    }
    golden
}

/// `text` with the runner's `$__TEST_DIR__` (or `${__TEST_DIR__}`) replaced by `dir`.
pub(crate) fn at_dir(text: &str, dir: &Path) -> String {
    let dir = dir.display().to_string();
    text.replace(&format!("${{{TEST_DIR}}}"), &dir)
        .replace(&format!("${TEST_DIR}"), &dir)
}

/// Every `sql/*.slt` file, sorted.
pub(crate) fn golden_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("sql");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("sql/ directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "slt"))
        .collect();
    files.sort();
    files
}

/// Runs golden `path` at each of its parallelisms; returns every failure.
async fn run_golden(path: &Path) -> Vec<String> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut failures = Vec::new();
    for parallelism in golden(path).parallelism {
        let file = name.clone();
        let mut runner = sqllogictest::Runner::new(move || {
            let db = WeirDb::new(&file, parallelism);
            async move { Ok::<_, SltError>(db) }
        });
        runner.with_column_validator(sqllogictest::strict_column_validator);
        if let Err(e) = runner.run_file_async(path).await {
            failures.push(format!(
                "{name} at parallelism {parallelism}: {}",
                e.display(false)
            ));
        }
    }
    failures
}

/// One test per golden file, named after it (`slt::group_by` runs `sql/group_by.slt`), and
/// [`GOLDENS`], the list of them all.
macro_rules! goldens {
    ($($name:ident,)*) => {
        /// The file names (without `.slt`) of the goldens that have a test.
        const GOLDENS: &[&str] = &[$(stringify!($name)),*];
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                check_golden(stringify!($name)).await;
            }
        )*
    };
}

goldens! {
    aggregate_filter,
    cascading_windows,
    cumulate,
    dedup_first,
    dedup_first_ties,
    dedup_last,
    distinct,
    errors_aggregate,
    errors_cascading_windows,
    errors_dedup_first,
    errors_join,
    errors_late_update_rows,
    errors_limit,
    errors_match_recognize,
    errors_order_by,
    errors_over,
    errors_query_positions,
    errors_route_without_sink,
    errors_select_without_insert,
    errors_session_partition,
    errors_set_key,
    errors_syntax,
    errors_table_options,
    errors_tumble_descriptor,
    errors_unknown_column,
    errors_unknown_table,
    errors_updating_results,
    errors_upsert_kafka,
    errors_watermark,
    errors_watermark_lateness,
    errors_watermark_option,
    errors_window_bounds_in_where,
    errors_window_top_n,
    errors_with_option,
    expressions,
    flink_compat,
    flink_time_formats,
    flink_time_functions,
    group_by,
    group_by_decimal,
    group_by_having,
    group_by_retracting,
    hop,
    interval_join,
    interval_join_condition,
    interval_join_self,
    late_route,
    late_route_dedup,
    late_route_join,
    late_route_over,
    late_route_top_n,
    late_update,
    over,
    regular_join,
    session,
    table_join,
    temporal_join,
    top_n,
    tumble,
    types,
    types_float_sum,
    views,
    window_join,
    window_top_n,
    windows_over_views,
}

/// Runs `sql/<name>.slt` at each of its parallelisms and fails with every mismatch. With
/// `WEIR_SLT_COMPLETE=1` it first rewrites the file's expected output with what Weir returns
/// at its first parallelism (review the diff before committing it), then checks the rest.
async fn check_golden(name: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("sql")
        .join(format!("{name}.slt"));
    if std::env::var_os("WEIR_SLT_COMPLETE").is_some_and(|v| v == "1") {
        complete_golden(&path).await;
    }
    let failures = run_golden(&path).await;
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Rewrites golden `path`'s expected results and errors with Weir's, at its first parallelism.
async fn complete_golden(path: &Path) {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let parallelism = golden(path).parallelism[0];
    let mut runner = sqllogictest::Runner::new(move || {
        let db = WeirDb::new(&name, parallelism);
        async move { Ok::<_, SltError>(db) }
    });
    runner
        .update_test_file(
            path,
            " ",
            sqllogictest::default_validator,
            sqllogictest::default_normalizer,
            sqllogictest::strict_column_validator,
        )
        .await
        .unwrap_or_else(|e| panic!("completing {}: {e}", path.display()));
}

#[test]
fn every_golden_file_has_a_test() {
    let files: Vec<String> = golden_files()
        .iter()
        .filter_map(|f| f.file_stem().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    let missing: Vec<&String> = files
        .iter()
        .filter(|f| !GOLDENS.contains(&f.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "sql/ has goldens without a test: add {missing:?} to `goldens!` in tests/engine/slt.rs"
    );
    let gone: Vec<&&str> = GOLDENS
        .iter()
        .filter(|g| !files.iter().any(|f| f == *g))
        .collect();
    assert!(
        gone.is_empty(),
        "`goldens!` names files sql/ lacks: {gone:?}"
    );
}
