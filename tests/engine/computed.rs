//! Computed source columns and user scalar functions: a timestamp computed at the source from
//! Int64 milliseconds, watermarks generated on it, the column written to Parquet; expression
//! errors at prepare and at run time naming `sources[i].computed[j]`; a function registered on
//! the engine called from a computed column, a filter and a projection.

use crate::support::read_parquet_dir;
use arrow::array::{Array, AsArray, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Int64Type, TimeUnit, TimestampMillisecondType};
use std::path::Path;
use std::sync::Arc;
use weir::datafusion::logical_expr::{ColumnarValue, ScalarUDF, Volatility, create_udf};
use weir::{Engine, JobSpec};

/// `id,date_time` rows in `dir/in.csv`.
fn write_csv(dir: &Path, rows: &[(i64, i64)]) -> String {
    let mut text = String::from("id,date_time\n");
    for (id, t) in rows {
        text.push_str(&format!("{id},{t}\n"));
    }
    let path = dir.join("in.csv");
    std::fs::write(&path, text).expect("write input");
    path.display().to_string()
}

/// A job reading `input` with the given extra source fields (computed, watermark), then
/// `operators` (YAML list items reading `bids`, the last named `last`), into Parquet at `output`.
fn spec(input: &str, output: &Path, source_extra: &str, operators: &str) -> JobSpec {
    let sink_input = if operators.is_empty() { "bids" } else { "last" };
    let yaml = format!(
        r#"
job: computed
sources:
  - name: bids
    connector: file
    schema:
      - {{ name: id, type: int64, nullable: false }}
      - {{ name: date_time, type: int64 }}
{source_extra}
    options: {{ path: "{input}", format: csv, batch_size: 2 }}
operators: [{operators}]
sinks:
  - name: out
    connector: file
    input: {sink_input}
    options: {{ path: "{output}", format: parquet }}
"#,
        output = output.display()
    );
    JobSpec::from_yaml_str(&yaml, "c.yaml").expect("valid spec")
}

const TS: &str = r#"    computed:
      - { name: ts, expression: "to_timestamp_millis(date_time)" }"#;

fn column_i64(batches: &[RecordBatch], name: &str) -> Vec<i64> {
    batches
        .iter()
        .flat_map(|b| {
            let c = b.column_by_name(name).expect("column");
            let c = c.as_any().downcast_ref::<Int64Array>().expect("Int64");
            c.iter().map(|v| v.expect("not null")).collect::<Vec<_>>()
        })
        .collect()
}

#[tokio::test]
async fn computed_timestamp_reaches_parquet_with_its_type_and_values() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rows = [(1, 1_000), (2, 1_500), (3, 12_000), (4, 500), (5, -2_001)];
    let input = write_csv(dir.path(), &rows);
    let out = dir.path().join("out");
    let extra = format!("{TS}\n    watermark: {{ column: ts, interval: 0 }}");
    let spec = spec(&input, &out, &extra, "");

    let engine = Engine::new();
    let job = engine
        .prepare(&spec, Some("c.yaml"))
        .await
        .expect("prepares");
    let schema = job.schemas[&(weir::api::OperatorId::new("bids"), None)].clone();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, ["id", "date_time", "ts"]);
    engine
        .start(job)
        .await
        .expect("starts")
        .wait()
        .await
        .expect("runs");

    let batches = read_parquet_dir(&out);
    let ts_type = DataType::Timestamp(TimeUnit::Millisecond, None);
    assert_eq!(batches[0].schema().field(2).data_type(), &ts_type);
    assert_eq!(column_i64(&batches, "id"), [1, 2, 3, 4, 5]);
    let ts: Vec<i64> = batches
        .iter()
        .flat_map(|b| {
            b.column(2)
                .as_primitive::<TimestampMillisecondType>()
                .values()
                .to_vec()
        })
        .collect();
    assert_eq!(ts, rows.map(|r| r.1));
}

#[tokio::test]
async fn watermarks_on_a_computed_column_fire_windows_and_drop_late_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 500 arrives after the watermark passed 11_999, so its window [0, 10s) already fired.
    let input = write_csv(
        dir.path(),
        &[(1, 1_000), (2, 12_000), (3, 500), (4, 25_000)],
    );
    let out = dir.path().join("out");
    let extra = format!("{TS}\n    watermark: {{ column: ts, interval: 0 }}");
    let window = r#"{ name: last, type: window, input: bids, options: {
        time_column: ts, window: { type: tumble, size: 10s },
        aggregates: [{ function: count, as: n }], late: { policy: drop } } }"#;
    Engine::new()
        .run(&spec(&input, &out, &extra, window), Some("c.yaml"))
        .await
        .expect("runs");
    let batches = read_parquet_dir(&out);
    let mut windows: Vec<(i64, i64)> = batches
        .iter()
        .flat_map(|b| {
            let start = b
                .column_by_name("window_start")
                .expect("window_start")
                .as_primitive::<TimestampMillisecondType>()
                .clone();
            let n = b
                .column_by_name("n")
                .expect("n")
                .as_primitive::<Int64Type>()
                .clone();
            (0..b.num_rows())
                .map(|i| (start.value(i), n.value(i)))
                .collect::<Vec<_>>()
        })
        .collect();
    windows.sort_unstable();
    assert_eq!(windows, [(0, 1), (10_000, 1), (20_000, 1)]);
}

#[tokio::test]
async fn computed_column_errors_name_their_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = write_csv(dir.path(), &[(1, 1_000), (2, 2_000)]);
    let out = dir.path().join("out");
    let engine = Engine::new();
    let prepare_error = |extra: &str| {
        let spec = spec(&input, &out, extra, "");
        let engine = engine.clone();
        async move {
            engine
                .prepare(&spec, Some("c.yaml"))
                .await
                .expect_err("refused")
                .to_string()
        }
    };

    let err =
        prepare_error(r#"    computed: [{ name: ts, expression: "to_timestamp_millis(nope)" }]"#)
            .await;
    assert!(
        err.starts_with(
            "c.yaml: invalid expression at sources[0].computed[0].expression: \
             `to_timestamp_millis(nope)`: "
        ) && err.contains("nope"),
        "{err}"
    );
    let err = prepare_error(r#"    computed: [{ name: id, expression: "date_time + 1" }]"#).await;
    assert!(
        err.starts_with(
            "c.yaml: invalid configuration at sources[0].computed[0].name: `id` is already a \
             column of `bids` (columns: id Int64, date_time Int64)"
        ),
        "{err}"
    );
    let err = prepare_error(&format!("{TS}\n    watermark: {{ column: tss }}")).await;
    assert!(
        err.contains("sources[0].watermark.column")
            && err.contains("columns: id Int64, date_time Int64, ts Timestamp(ms)"),
        "{err}"
    );

    // Evaluation errors fail the job, naming the expression.
    let spec = spec(
        &input,
        &out,
        r#"    computed: [{ name: q, expression: "10 / (id - 2)" }]"#,
        "",
    );
    let err = engine
        .run(&spec, Some("c.yaml"))
        .await
        .expect_err("division by zero")
        .to_string();
    assert!(
        err.contains(
            "invalid expression at sources[0].computed[0].expression: `10 / (id - 2)`: \
             evaluation failed:"
        ) && err.contains("Divide by zero"),
        "{err}"
    );
}

/// `twice(Int64) -> Int64`.
pub(crate) fn twice() -> ScalarUDF {
    create_udf(
        "twice",
        vec![DataType::Int64],
        DataType::Int64,
        Volatility::Immutable,
        Arc::new(|args: &[ColumnarValue]| {
            let arrays = ColumnarValue::values_to_arrays(args)?;
            let doubled: Int64Array = arrays[0]
                .as_primitive::<Int64Type>()
                .unary(|v| v.wrapping_mul(2));
            Ok(ColumnarValue::Array(Arc::new(doubled)))
        }),
    )
}

#[tokio::test]
async fn a_registered_function_works_in_computed_columns_filters_and_projections() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = write_csv(dir.path(), &[(1, 10), (2, 20), (3, 30), (4, 40)]);
    let out = dir.path().join("out");
    let extra = r#"    computed: [{ name: doubled, expression: "twice(id)" }]"#;
    let operators = r#"
      { name: big, type: filter, input: bids, options: { predicate: "twice(id) > 4" } },
      { name: last, type: project, input: big,
        options: { expressions: [id, doubled, "TWICE(doubled) AS quad"] } }"#;
    let spec = spec(&input, &out, extra, operators);

    // Registered after the engine's built-ins were; a clone taken before does not see it.
    let before = Engine::new();
    let mut engine = before.clone();
    engine.register_udf(twice());
    let err = before
        .prepare(&spec, Some("c.yaml"))
        .await
        .expect_err("unknown function")
        .to_string();
    assert!(
        err.contains("sources[0].computed[0].expression") && err.contains("twice"),
        "{err}"
    );
    let state = engine.registry_mut().session_state();
    assert!(state.scalar_functions().contains_key("twice"));
    assert!(state.scalar_functions().contains_key("upper"));

    engine.run(&spec, Some("c.yaml")).await.expect("runs");
    let batches = read_parquet_dir(&out);
    assert_eq!(column_i64(&batches, "id"), [3, 4]);
    assert_eq!(column_i64(&batches, "doubled"), [6, 8]);
    assert_eq!(column_i64(&batches, "quad"), [12, 16]);
}
