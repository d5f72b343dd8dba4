//! Tests of `datagen`.
use super::*;
use arrow::array::{Array, AsArray};
use arrow::compute::concat_batches;
use arrow::datatypes::{DataType, Field, Int64Type, Schema, TimeUnit};
use weir_api::{BadRecordPolicy, JobId, OperatorId, SubtaskIndex};

fn ctx() -> TaskContext {
    TaskContext::new(
        JobId::new("job"),
        OperatorId::new("gen"),
        SubtaskIndex(0),
        1,
    )
}

async fn prepare(schema: SchemaRef, options: serde_json::Value) -> Result<Arc<dyn PreparedSource>> {
    let id = OperatorId::new("gen");
    let spec = ConnectorSpec {
        operator_id: &id,
        options: &options,
        options_path: "sources[0].options",
        schema: Some(schema),
        bad_records: BadRecordPolicy::Fail,
        reach: weir_api::Reach::Full,
    };
    DatagenSourceFactory.prepare(spec).await
}

/// Reads `split` from its cursor to the end, checking the cursor of every batch.
async fn read(source: &dyn PreparedSource, split: &SourceSplit) -> RecordBatch {
    let mut reader = source.open_split(split, &ctx()).await.expect("open");
    let mut batches = Vec::new();
    let mut cursor = split.cursor.next_record;
    while let Some(batch) = reader.next_batch().await.expect("read") {
        assert!(batch.dead_letters.is_none());
        cursor += batch.data.num_rows() as u64;
        assert_eq!(batch.cursor.next_record, cursor);
        batches.push(batch.data);
    }
    assert!(
        reader.next_batch().await.expect("read").is_none(),
        "stays exhausted"
    );
    concat_batches(&source.schema(), &batches).expect("concat")
}

fn ids(batch: &RecordBatch) -> Vec<i64> {
    batch
        .column(0)
        .as_primitive::<Int64Type>()
        .values()
        .to_vec()
}

/// One column of every supported type, some nullable with nulls.
fn all_types() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("i8", DataType::Int8, true),
        Field::new("i16", DataType::Int16, false),
        Field::new("i32", DataType::Int32, true),
        Field::new("u8", DataType::UInt8, false),
        Field::new("u16", DataType::UInt16, false),
        Field::new("u32", DataType::UInt32, true),
        Field::new("u64", DataType::UInt64, false),
        Field::new("f32", DataType::Float32, false),
        Field::new("f64", DataType::Float64, true),
        Field::new("name", DataType::Utf8, true),
        Field::new("flag", DataType::Boolean, true),
        Field::new(
            "ts_ms",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            false,
        ),
        Field::new(
            "ts_us",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new(
            "ts_ns",
            DataType::Timestamp(TimeUnit::Nanosecond, Some("+02:00".into())),
            false,
        ),
        Field::new("day", DataType::Date32, false),
    ]))
}

fn all_types_options(rows: u64, splits: u32, batch_size: u32, seed: u64) -> serde_json::Value {
    serde_json::json!({
        "rows": rows,
        "splits": splits,
        "batch_size": batch_size,
        "seed": seed,
        "fields": {
            "i8": {"kind": "random", "null_fraction": 0.3},
            "i32": {"kind": "random", "min": -5, "max": 5, "null_fraction": 0.1},
            "u32": {"kind": "sequence", "min": 10, "cardinality": 7, "null_fraction": 1.0},
            "u64": {"kind": "random"},
            "f32": {"kind": "sequence", "min": 0.5, "max": 10},
            "f64": {"null_fraction": 0.5},
            "name": {"kind": "random", "cardinality": 50, "null_fraction": 0.2},
            "flag": {"null_fraction": 0.4},
            "ts_us": {"kind": "random"},
            "day": {"kind": "random", "min": 0, "max": 365},
        }
    })
}

#[tokio::test]
async fn splits_cover_every_row_once() {
    let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
    for (rows, splits, batch_size) in [(1003u64, 4u32, 100u32), (2, 5, 1), (0, 3, 8), (10, 1, 3)] {
        let options = serde_json::json!({"rows": rows, "splits": splits, "batch_size": batch_size});
        let source = prepare(schema.clone(), options).await.expect("prepare");
        let list = source.enumerate_splits().await.expect("splits");
        let expected_ids: Vec<String> = (0..splits).map(|i| format!("datagen-{i}")).collect();
        let got_ids: Vec<String> = list.iter().map(|s| s.id.clone()).collect();
        assert_eq!(got_ids, expected_ids);
        let mut all = Vec::new();
        for split in &list {
            assert_eq!(split.cursor, SplitCursor::default());
            let batch = read(source.as_ref(), split).await;
            assert!(batch.num_rows() <= (rows as usize).div_ceil(splits as usize));
            all.extend(ids(&batch));
        }
        // Splits are contiguous ranges in order, so no sort is needed.
        let expected: Vec<i64> = (0..rows as i64).collect();
        assert_eq!(all, expected, "rows {rows}, splits {splits}");
    }
}

#[tokio::test]
async fn batches_have_the_declared_types() {
    let schema = all_types();
    let source = prepare(schema.clone(), all_types_options(100, 1, 64, 0))
        .await
        .expect("prepare");
    assert_eq!(source.schema(), schema);
    assert_eq!(source.capabilities(), vec![SourceCapability::Replayable]);
    assert_eq!(source.boundedness(), Boundedness::Bounded);
    let split = &source.enumerate_splits().await.expect("splits")[0];
    let mut reader = source.open_split(split, &ctx()).await.expect("open");
    let first = reader.next_batch().await.expect("read").expect("a batch");
    assert_eq!(first.data.num_rows(), 64);
    assert_eq!(first.data.schema(), schema);
    for (column, field) in first.data.columns().iter().zip(schema.fields()) {
        assert_eq!(column.data_type(), field.data_type(), "{}", field.name());
        if !field.is_nullable() {
            assert_eq!(column.null_count(), 0, "{}", field.name());
        }
    }
}

#[tokio::test]
async fn default_values_follow_the_row_index() {
    let schema = all_types();
    let source = prepare(schema, serde_json::json!({"rows": 2000, "batch_size": 700}))
        .await
        .expect("prepare");
    let split = &source.enumerate_splits().await.expect("splits")[0];
    let batch = read(source.as_ref(), split).await;
    let col = |name: &str| batch.column_by_name(name).expect("column").clone();
    assert_eq!(ids(&batch), (0..2000).collect::<Vec<i64>>());
    let i8s = col("i8");
    let i8s = i8s.as_primitive::<arrow::datatypes::Int8Type>();
    assert_eq!(
        i8s.value(300),
        300u32 as u8 as i8,
        "sequences wrap in the type"
    );
    let ts_ms = col("ts_ms");
    assert_eq!(
        ts_ms
            .as_primitive::<arrow::datatypes::TimestampMillisecondType>()
            .value(1234),
        1234
    );
    let ts_us = col("ts_us");
    assert_eq!(
        ts_us
            .as_primitive::<arrow::datatypes::TimestampMicrosecondType>()
            .value(1234),
        1_234_000
    );
    let ts_ns = col("ts_ns");
    assert_eq!(
        ts_ns
            .as_primitive::<arrow::datatypes::TimestampNanosecondType>()
            .value(7),
        7_000_000
    );
    let days = col("day");
    assert_eq!(
        days.as_primitive::<arrow::datatypes::Date32Type>()
            .value(1999),
        1999
    );
    let names = col("name");
    let names = names.as_string::<i32>();
    assert_eq!(names.value(0), "name-0");
    assert_eq!(names.value(1999), "name-999");
    assert_eq!(names.null_count(), 0);
    let f64s = col("f64");
    let f64s = f64s.as_primitive::<arrow::datatypes::Float64Type>();
    assert!(f64s.values().iter().all(|v| (0.0..1000.0).contains(v)));
    let flags = col("flag");
    let trues = flags.as_boolean().true_count();
    assert!(
        (800..1200).contains(&trues),
        "{trues} of 2000 random booleans are true"
    );
}

#[tokio::test]
async fn field_options_shape_the_values() {
    let source = prepare(all_types(), all_types_options(5000, 1, 5000, 3))
        .await
        .expect("prepare");
    let split = &source.enumerate_splits().await.expect("splits")[0];
    let batch = read(source.as_ref(), split).await;
    let col = |name: &str| batch.column_by_name(name).expect("column").clone();
    let i32s = col("i32");
    let i32s = i32s.as_primitive::<arrow::datatypes::Int32Type>();
    assert!(i32s.iter().flatten().all(|v| (-5..=5).contains(&v)));
    let distinct: std::collections::BTreeSet<i32> = i32s.iter().flatten().collect();
    assert_eq!(distinct.len(), 11, "every value of -5..=5 appears");
    let nulls = i32s.null_count();
    assert!(
        (350..650).contains(&nulls),
        "{nulls} nulls for a fraction of 0.1"
    );
    assert_eq!(
        col("u32").null_count(),
        5000,
        "a null fraction of 1 nulls every row"
    );
    let u32s = col("u32");
    let u32s = u32s.as_primitive::<arrow::datatypes::UInt32Type>();
    assert_eq!(&u32s.values()[..9], &[10, 11, 12, 13, 14, 15, 16, 10, 11]);
    let f32s = col("f32");
    let f32s = f32s.as_primitive::<arrow::datatypes::Float32Type>();
    assert_eq!(
        &f32s.values()[8..12],
        &[8.5, 9.5, 0.5, 1.5],
        "wraps below `max`"
    );
    let names = col("name");
    let names = names.as_string::<i32>();
    let distinct: std::collections::BTreeSet<&str> = names.iter().flatten().collect();
    assert_eq!(distinct.len(), 50);
    assert!(distinct.iter().all(|v| {
        v.strip_prefix("name-")
            .and_then(|n| n.parse::<u32>().ok())
            .is_some_and(|n| n < 50)
    }));
    let ts_us = col("ts_us");
    let ts_us = ts_us.as_primitive::<arrow::datatypes::TimestampMicrosecondType>();
    let (from, to) = (1_577_836_800_000_000, 1_893_456_000_000_000);
    assert!(
        ts_us.values().iter().all(|v| (from..to).contains(v)),
        "2020..2030"
    );
    let days = col("day");
    let days = days.as_primitive::<arrow::datatypes::Date32Type>();
    assert!(days.values().iter().all(|v| (0..=365).contains(v)));
}

#[tokio::test]
async fn cursor_resume_repeats_a_full_read() {
    let full_source = prepare(all_types(), all_types_options(3001, 3, 4096, 42))
        .await
        .expect("prepare");
    let again = prepare(all_types(), all_types_options(3001, 3, 4096, 42))
        .await
        .expect("prepare");
    for split in full_source.enumerate_splits().await.expect("splits") {
        let full = read(full_source.as_ref(), &split).await;
        assert_eq!(read(again.as_ref(), &split).await, full, "deterministic");
        for batch_size in [1u32, 7, 333, 5000] {
            let resumed_source = prepare(all_types(), all_types_options(3001, 3, batch_size, 42))
                .await
                .expect("prepare");
            for k in [0usize, 1, 500, full.num_rows() - 1, full.num_rows()] {
                if batch_size == 1 && k < 500 {
                    continue; // one-row batches over a whole split are slow and add nothing
                }
                let from = SourceSplit {
                    cursor: SplitCursor {
                        next_record: k as u64,
                    },
                    ..split.clone()
                };
                let resumed = read(resumed_source.as_ref(), &from).await;
                assert_eq!(
                    resumed,
                    full.slice(k, full.num_rows() - k),
                    "split {}, cursor {k}, batch size {batch_size}",
                    split.id
                );
            }
        }
    }
    let other_seed = prepare(all_types(), all_types_options(3001, 3, 4096, 43))
        .await
        .expect("prepare");
    let split = &other_seed.enumerate_splits().await.expect("splits")[0];
    let a = read(full_source.as_ref(), split).await;
    let b = read(other_seed.as_ref(), split).await;
    assert_eq!(
        a.column(0),
        b.column(0),
        "sequences do not depend on the seed"
    );
    assert_ne!(
        a.column_by_name("u64"),
        b.column_by_name("u64"),
        "random columns do"
    );
}

#[tokio::test]
async fn unsupported_type_names_the_column_and_path() {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("tags", DataType::new_list(DataType::Utf8, true), true),
    ]));
    let err = prepare(schema, serde_json::json!({"rows": 1}))
        .await
        .expect_err("lists are not supported");
    let Error::Config { path, message } = err else {
        panic!("expected a config error, got {err}");
    };
    assert_eq!(path, "sources[0].schema");
    assert!(message.contains("`tags`"), "{message}");
}

#[tokio::test]
async fn bad_options_name_their_path() {
    let schema = all_types();
    let cases = [
        (
            serde_json::json!({}),
            "sources[0].options",
            "missing field `rows`",
        ),
        (
            serde_json::json!({"rows": 1, "rowz": 2}),
            "sources[0].options.rowz",
            "unknown field `rowz`",
        ),
        (
            serde_json::json!({"rows": -1}),
            "sources[0].options.rows",
            "invalid value",
        ),
        (
            serde_json::json!({"rows": 1, "splits": 0}),
            "sources[0].options.splits",
            "at least 1",
        ),
        (
            serde_json::json!({"rows": 1, "batch_size": 0}),
            "sources[0].options.batch_size",
            "between",
        ),
        (
            serde_json::json!({"rows": 1, "fields": {"nope": {}}}),
            "sources[0].options.fields.nope",
            "no column `nope`",
        ),
        (
            serde_json::json!({"rows": 1, "fields": {"id": {"kind": "zigzag"}}}),
            "sources[0].options.fields.id.kind",
            "unknown variant",
        ),
        (
            serde_json::json!({"rows": 1, "fields": {"id": {"null_fraction": 0.5}}}),
            "sources[0].options.fields.id.null_fraction",
            "NOT NULL",
        ),
        (
            serde_json::json!({"rows": 1, "fields": {"u8": {"max": 256}}}),
            "sources[0].options.fields.u8.max",
            "outside",
        ),
        (
            serde_json::json!({"rows": 1, "fields": {"i16": {"min": 1.5}}}),
            "sources[0].options.fields.i16.min",
            "integer",
        ),
        (
            serde_json::json!({"rows": 1, "fields": {"i16": {"min": 5, "max": 4}}}),
            "sources[0].options.fields.i16.max",
            "below",
        ),
        (
            serde_json::json!({"rows": 1, "fields": {"u8": {"min": 250, "cardinality": 10}}}),
            "sources[0].options.fields.u8.cardinality",
            "exceeds",
        ),
        (
            serde_json::json!({"rows": 1, "fields": {"name": {"min": 1}}}),
            "sources[0].options.fields.name.min",
            "no numeric range",
        ),
        (
            serde_json::json!({"rows": 1, "fields": {"name": {"cardinality": 0}}}),
            "sources[0].options.fields.name.cardinality",
            "at least 1",
        ),
    ];
    for (options, want_path, want_message) in cases {
        let err = prepare(schema.clone(), options.clone())
            .await
            .expect_err("invalid options");
        let Error::Config { path, message } = err else {
            panic!("expected a config error for {options}, got {err}");
        };
        assert_eq!(path, want_path, "{options}: {message}");
        assert!(message.contains(want_message), "{options}: {message}");
    }
}

#[tokio::test]
async fn missing_schema_and_unknown_split_are_config_errors() {
    let id = OperatorId::new("gen");
    let options = serde_json::json!({"rows": 10});
    let spec = ConnectorSpec {
        operator_id: &id,
        options: &options,
        options_path: "sources[1].options",
        schema: None,
        bad_records: BadRecordPolicy::Fail,
        reach: weir_api::Reach::Full,
    };
    let err = DatagenSourceFactory
        .prepare(spec)
        .await
        .expect_err("no schema");
    assert!(err.to_string().contains("sources[1].schema"), "{err}");

    let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
    let source = prepare(schema, serde_json::json!({"rows": 10, "splits": 2}))
        .await
        .expect("prepare");
    for id in ["datagen-2", "datagen-01", "file-0"] {
        let split = SourceSplit {
            id: id.into(),
            cursor: SplitCursor::default(),
            size_bytes: None,
            range: None,
        };
        let err = source
            .open_split(&split, &ctx())
            .await
            .err()
            .expect("unknown split");
        assert!(err.to_string().contains("does not exist"), "{err}");
    }
    let past_end = SourceSplit {
        id: "datagen-1".into(),
        cursor: SplitCursor { next_record: 6 },
        size_bytes: None,
        range: None,
    };
    let err = source
        .open_split(&past_end, &ctx())
        .await
        .err()
        .expect("past the end");
    assert!(err.to_string().contains("past the end"), "{err}");
}

/// Prints datagen throughput; run with
/// `cargo test --release -p weir-runtime datagen_throughput -- --ignored --nocapture`.
#[tokio::test]
#[ignore = "a measurement, not a check"]
async fn datagen_throughput() {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("user", DataType::Int32, false),
        Field::new("price", DataType::Float64, false),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            false,
        ),
        Field::new("category", DataType::Utf8, false),
        Field::new("channel", DataType::Utf8, false),
    ]));
    let rows = 20_000_000u64;
    let options = serde_json::json!({
        "rows": rows,
        "fields": {
            "user": {"kind": "random", "min": 0, "max": 999_999},
            "channel": {"kind": "random", "cardinality": 20},
        }
    });
    let source = prepare(schema, options).await.expect("prepare");
    let split = &source.enumerate_splits().await.expect("splits")[0];
    let mut reader = source.open_split(split, &ctx()).await.expect("open");
    let started = std::time::Instant::now();
    let mut read_rows = 0;
    while let Some(batch) = reader.next_batch().await.expect("read") {
        read_rows += batch.data.num_rows() as u64;
    }
    let secs = started.elapsed().as_secs_f64();
    assert_eq!(read_rows, rows);
    println!(
        "datagen: {rows} rows x 6 columns in {secs:.3} s = {:.1} M rows/s",
        rows as f64 / secs / 1e6
    );
}
