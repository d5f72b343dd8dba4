//! Predicate pushdown into Parquet: a pruned source reads only row groups and pages that may
//! hold a matching row, every matching row still comes out, and cursors resume exactly.

#![allow(clippy::unwrap_used)]

use crate::test_support::{prepare, read_all, read_split};
use arrow::array::{ArrayRef, Float64Array, Int64Array, StringArray, TimestampMillisecondArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use arrow::record_batch::RecordBatch;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use serde_json::json;
use std::sync::Arc;
use weir_api::{BadRecordPolicy, PreparedSource, PruneCondition, SourcePredicate};

/// Rows in the test file; row groups of 20 rows, pages of 5.
const ROWS: i64 = 100;
const GROUP: i64 = 20;

fn x_of(i: i64) -> f64 {
    match i {
        0 => -0.0,
        55 => f64::NAN,
        _ => i as f64,
    }
}

fn note_of(i: i64) -> Option<&'static str> {
    (i >= GROUP && i != 70).then_some("a")
}

/// Row `i`: id, price, name, x, note, ts; every value a function of the id.
fn batch() -> RecordBatch {
    let ids: Vec<i64> = (0..ROWS).collect();
    RecordBatch::try_from_iter([
        ("id", Arc::new(Int64Array::from(ids.clone())) as ArrayRef),
        (
            "price",
            Arc::new(Int64Array::from_iter_values(ids.iter().map(|i| i * 1000))) as ArrayRef,
        ),
        (
            "name",
            Arc::new(StringArray::from_iter_values(
                ids.iter().map(|i| format!("n{i:03}")),
            )) as ArrayRef,
        ),
        (
            "x",
            Arc::new(Float64Array::from_iter_values(ids.iter().map(|&i| x_of(i)))) as ArrayRef,
        ),
        (
            "note",
            Arc::new(StringArray::from_iter(ids.iter().map(|&i| note_of(i)))) as ArrayRef,
        ),
        (
            "ts",
            Arc::new(TimestampMillisecondArray::from_iter_values(
                ids.iter().map(|i| i * 1000),
            )) as ArrayRef,
        ),
    ])
    .unwrap()
}

/// The test file with `statistics` (page: with a page index), optionally truncating
/// statistics of text to `truncate` bytes.
fn parquet_file(statistics: EnabledStatistics, truncate: Option<usize>) -> Vec<u8> {
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(GROUP as usize))
        .set_data_page_row_count_limit(5)
        .set_write_batch_size(5)
        .set_statistics_enabled(statistics)
        .set_statistics_truncate_length(truncate)
        .set_column_index_truncate_length(truncate)
        .build();
    let batch = batch();
    let mut out = Vec::new();
    let mut writer =
        parquet::arrow::ArrowWriter::try_new(&mut out, batch.schema(), Some(props)).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    out
}

fn write_file(dir: &std::path::Path, name: &str, bytes: Vec<u8>) -> String {
    crate::test_support::write(dir, name, bytes)
}

async fn source(options: serde_json::Value, schema: Option<SchemaRef>) -> Arc<dyn PreparedSource> {
    prepare(options, schema, BadRecordPolicy::Fail)
        .await
        .unwrap()
}

fn pruned(
    source: &Arc<dyn PreparedSource>,
    conditions: &serde_json::Value,
) -> Arc<dyn PreparedSource> {
    let conditions: Vec<PruneCondition> = serde_json::from_value(conditions.clone()).unwrap();
    let predicate = SourcePredicate::resolve(&conditions, &source.schema()).unwrap();
    source.prune(&predicate).expect("a Parquet source prunes")
}

fn id_of(row: &str) -> i64 {
    row.split('|').next().unwrap().parse().unwrap()
}

/// A predicate of the tests: the conditions, the same test in Rust (as the job's filter would
/// decide, floats in IEEE total order), and the rows a pruned read of the file with a page
/// index reads.
struct Case {
    conditions: serde_json::Value,
    matches: fn(i64) -> bool,
    read: usize,
}

fn cases() -> Vec<Case> {
    let ts = |s: u32| format!("1970-01-01T00:{:02}:{:02}", s / 60, s % 60);
    vec![
        // One page of one row group.
        Case {
            conditions: json!([{ "column": "id", "op": "=", "value": 42 }]),
            matches: |i| i == 42,
            read: 5,
        },
        // The last two pages.
        Case {
            conditions: json!([{ "column": "price", "op": ">=", "value": 90000 }]),
            matches: |i| i * 1000 >= 90000,
            read: 10,
        },
        // Nothing.
        Case {
            conditions: json!([{ "column": "price", "op": ">", "value": 1_000_000 }]),
            matches: |_| false,
            read: 0,
        },
        // Everything.
        Case {
            conditions: json!([{ "column": "id", "op": ">=", "value": 0 }]),
            matches: |_| true,
            read: 100,
        },
        // A conjunction: rows 30..45, pages of two row groups.
        Case {
            conditions: json!([
                { "column": "id", "op": ">=", "value": 30 },
                { "column": "price", "op": "<", "value": 45000 },
            ]),
            matches: |i| (30..45).contains(&i),
            read: 15,
        },
        Case {
            conditions: json!([{ "column": "id", "op": "<=", "value": 2 }]),
            matches: |i| i <= 2,
            read: 5,
        },
        // Text compared as bytes.
        Case {
            conditions: json!([{ "column": "name", "op": "in", "value": ["n001", "n099", "zzz"] }]),
            matches: |i| i == 1 || i == 99,
            read: 10,
        },
        Case {
            conditions: json!([{ "column": "name", "op": "<>", "value": "n000" }]),
            matches: |i| i != 0,
            read: 100,
        },
        Case {
            conditions: json!([{ "column": "name", "op": "<", "value": "n01" }]),
            matches: |i| i < 10,
            read: 10,
        },
        // Floats: NaN (row 55) is above every number, so `>` skips nothing.
        Case {
            conditions: json!([{ "column": "x", "op": ">", "value": 97.5 }]),
            matches: |i| x_of(i).total_cmp(&97.5).is_gt(),
            read: 100,
        },
        Case {
            conditions: json!([{ "column": "x", "op": "<", "value": 2.5 }]),
            matches: |i| x_of(i).total_cmp(&2.5).is_lt(),
            read: 5,
        },
        // -0.0 (row 0) is below +0.0.
        Case {
            conditions: json!([{ "column": "x", "op": "<", "value": 0.0 }]),
            matches: |i| x_of(i).total_cmp(&0.0).is_lt(),
            read: 5,
        },
        Case {
            conditions: json!([{ "column": "x", "op": "=", "value": 56 }]),
            matches: |i| i == 56,
            read: 5,
        },
        // Nulls: row group 0 holds only nulls, row 70 is null too.
        Case {
            conditions: json!([{ "column": "note", "op": "is_not_null" }]),
            matches: |i| note_of(i).is_some(),
            read: 80,
        },
        Case {
            conditions: json!([{ "column": "note", "op": "=", "value": "a" }]),
            matches: |i| note_of(i).is_some(),
            read: 80,
        },
        Case {
            conditions: json!([{ "column": "note", "op": "is_null" }]),
            matches: |i| note_of(i).is_none(),
            read: 25,
        },
        // Timestamps in the column's unit.
        Case {
            conditions: json!([{ "column": "ts", "op": ">=", "value": ts(90) }]),
            matches: |i| i >= 90,
            read: 10,
        },
        Case {
            conditions: json!([{ "column": "ts", "op": "<", "value": ts(1) }]),
            matches: |i| i < 1,
            read: 5,
        },
    ]
}

/// Checks `pruned` against the unpruned read for `case`: the rows read are rows of the file in
/// file order, and the matching ones are exactly the file's matching rows.
fn check(case: &Case, all: &[String], read: &[String], what: &str) {
    let ids: Vec<i64> = read.iter().map(|r| id_of(r)).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{what}: {ids:?}");
    for row in read {
        assert!(all.contains(row), "{what}: {row} is not a row of the file");
    }
    let kept: Vec<&String> = read.iter().filter(|r| (case.matches)(id_of(r))).collect();
    let expected: Vec<&String> = all.iter().filter(|r| (case.matches)(id_of(r))).collect();
    assert_eq!(kept, expected, "{what}");
}

#[tokio::test]
async fn row_groups_and_pages_are_skipped_and_every_matching_row_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(
        dir.path(),
        "p.parquet",
        parquet_file(EnabledStatistics::Page, None),
    );
    let plain = source(json!({ "path": path, "batch_size": 7 }), None).await;
    let all = read_all(&plain).await.unwrap();
    assert_eq!(all.len(), ROWS as usize);
    for case in cases() {
        let what = case.conditions.to_string();
        let source = pruned(&plain, &case.conditions);
        let read = read_all(&source).await.unwrap();
        check(&case, &all, &read, &what);
        assert_eq!(read.len(), case.read, "{what}: {read:?}");
    }
    let source = pruned(&plain, &json!([{ "column": "id", "op": "=", "value": 42 }]));
    assert_eq!(
        source.describe(),
        format!(
            "file: parquet {path}; skips row groups and pages where no row can satisfy id = 42"
        )
    );
    // Projected after pruning (as the runtime does): the predicate's column need not be read.
    let narrow = source.project(&[2]).unwrap();
    assert_eq!(
        read_all(&narrow).await.unwrap(),
        ["n040", "n041", "n042", "n043", "n044"]
    );
    assert!(
        narrow
            .describe()
            .ends_with("; reads name; skips row groups and pages where no row can satisfy id = 42")
    );
}

#[tokio::test]
async fn without_a_page_index_whole_row_groups_and_without_statistics_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let chunk = write_file(
        dir.path(),
        "chunk.parquet",
        parquet_file(EnabledStatistics::Chunk, None),
    );
    let none = write_file(
        dir.path(),
        "none.parquet",
        parquet_file(EnabledStatistics::None, None),
    );
    let plain = source(json!({ "path": chunk }), None).await;
    let all = read_all(&plain).await.unwrap();
    let id42 = json!([{ "column": "id", "op": "=", "value": 42 }]);
    let read = read_all(&pruned(&plain, &id42)).await.unwrap();
    assert_eq!(read, all[40..60]);
    let plain = source(json!({ "path": none }), None).await;
    let read = read_all(&pruned(&plain, &id42)).await.unwrap();
    assert_eq!(read, all);
    for case in cases() {
        let what = format!("no statistics: {}", case.conditions);
        let read = read_all(&pruned(&plain, &case.conditions)).await.unwrap();
        check(&case, &all, &read, &what);
    }
}

#[tokio::test]
async fn truncated_text_bounds_are_used_as_bounds_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(
        dir.path(),
        "t.parquet",
        parquet_file(EnabledStatistics::Page, Some(2)),
    );
    let plain = source(json!({ "path": path }), None).await;
    let all = read_all(&plain).await.unwrap();
    for case in cases() {
        let what = format!("truncated: {}", case.conditions);
        let read = read_all(&pruned(&plain, &case.conditions)).await.unwrap();
        check(&case, &all, &read, &what);
    }
    // `n0` and `n1` bound everything: nothing is skipped by name, but `<>` a bound value is
    // not taken for "all rows equal it".
    let read = read_all(&pruned(
        &plain,
        &json!([{ "column": "name", "op": "<>", "value": "n0" }]),
    ))
    .await
    .unwrap();
    assert_eq!(read, all);
}

#[tokio::test]
async fn a_column_read_as_another_type_or_another_format_is_not_pruned() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(
        dir.path(),
        "p.parquet",
        parquet_file(EnabledStatistics::Page, None),
    );
    // `id` is Int64 in the file and read as Int32: its statistics are not used.
    let declared = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int32, false),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            false,
        ),
    ]));
    let plain = source(json!({ "path": path }), Some(declared)).await;
    let read = read_all(&pruned(
        &plain,
        &json!([{ "column": "id", "op": "=", "value": 42 }]),
    ))
    .await
    .unwrap();
    assert_eq!(read.len(), ROWS as usize);
    let read = read_all(&pruned(
        &plain,
        &json!([{ "column": "ts", "op": "<", "value": "1970-01-01T00:00:01" }]),
    ))
    .await
    .unwrap();
    assert_eq!(
        read,
        [
            "0|1970-01-01T00:00:00",
            "1|1970-01-01T00:00:01",
            "2|1970-01-01T00:00:02",
            "3|1970-01-01T00:00:03",
            "4|1970-01-01T00:00:04"
        ]
    );
    // CSV is read whole.
    let csv = crate::test_support::write(dir.path(), "a.csv", "id\n1\n2\n");
    let plain = source(json!({ "path": csv }), None).await;
    let conditions: Vec<PruneCondition> =
        serde_json::from_value(json!([{ "column": "id", "op": "=", "value": 1 }])).unwrap();
    let predicate = SourcePredicate::resolve(&conditions, &plain.schema()).unwrap();
    assert!(plain.prune(&predicate).is_none());
}

#[tokio::test]
async fn a_pruned_split_resumes_exactly_after_every_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(
        dir.path(),
        "p.parquet",
        parquet_file(EnabledStatistics::Page, None),
    );
    for split_size in [0, 1] {
        // split_size 1: one split per row group (`p.parquet#row-groups=g-g+1`).
        let plain = source(
            json!({ "path": path, "batch_size": 3, "split_size": split_size }),
            None,
        )
        .await;
        let splits = plain.enumerate_splits().await.unwrap();
        assert_eq!(splits.len(), if split_size == 0 { 1 } else { 5 });
        for case in cases() {
            let source = pruned(&plain, &case.conditions);
            for split in &splits {
                let what = format!("{} in {}", case.conditions, split.id);
                let first = split.range.map_or(0, |r| r.start as i64 * GROUP);
                let rows = if split.range.is_some() { GROUP } else { ROWS } as u64;
                let whole = read_split(&source, split).await.unwrap();
                // Every batch's cursor is one past its last row, counting skipped rows.
                if let Some(&last) = whole.cursors.last() {
                    let last_id = id_of(whole.rows.last().unwrap());
                    assert_eq!(last, (last_id - first + 1) as u64, "{what}");
                }
                assert!(whole.cursors.windows(2).all(|w| w[0] < w[1]), "{what}");
                for cursor in 0..=rows + 1 {
                    let mut resumed = split.clone();
                    resumed.cursor.next_record = cursor;
                    let rest = read_split(&source, &resumed).await.unwrap();
                    let expected: Vec<&String> = whole
                        .rows
                        .iter()
                        .filter(|r| id_of(r) - first >= cursor as i64)
                        .collect();
                    assert_eq!(
                        rest.rows.iter().collect::<Vec<_>>(),
                        expected,
                        "{what} from {cursor}"
                    );
                }
            }
        }
    }
}

#[tokio::test]
async fn rejected_rows_after_skipped_pages_name_their_row_of_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(
        dir.path(),
        "p.parquet",
        parquet_file(EnabledStatistics::Page, None),
    );
    // Prices from 32768 (row 33) on do not fit Int16.
    let declared = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("price", DataType::Int16, false),
    ]));
    let plain = prepare(
        json!({ "path": path, "batch_size": 4 }),
        Some(declared),
        BadRecordPolicy::DeadLetter,
    )
    .await
    .unwrap();
    let source = pruned(
        &plain,
        &json!([
            { "column": "id", "op": "in", "value": [3, 42, 97] },
            { "column": "id", "op": "<>", "value": 1000 },
        ]),
    );
    let split = source.enumerate_splits().await.unwrap().remove(0);
    let read = read_split(&source, &split).await.unwrap();
    // Pages 0..5, 40..45 and 95..100.
    assert_eq!(read.rows, ["0|0", "1|1000", "2|2000", "3|3000", "4|4000"]);
    let rows: Vec<&str> = read
        .dead_letters
        .iter()
        .map(|d| d.split('|').nth(3).unwrap().split(':').next().unwrap())
        .collect();
    assert_eq!(
        rows,
        [
            "row 41", "row 42", "row 43", "row 44", "row 45", "row 96", "row 97", "row 98",
            "row 99", "row 100"
        ]
    );
    assert_eq!(read.cursors.last(), Some(&100));
}

#[test]
fn pruning_counts_the_row_groups_and_page_rows_it_skips() {
    use parquet::arrow::arrow_reader::{ArrowReaderOptions, ParquetRecordBatchReaderBuilder};
    let bytes = bytes::Bytes::from(parquet_file(EnabledStatistics::Page, None));
    let options = ArrowReaderOptions::new()
        .with_page_index_policy(parquet::file::metadata::PageIndexPolicy::Required);
    let builder = ParquetRecordBatchReaderBuilder::try_new_with_options(bytes, options).unwrap();
    let conditions: Vec<PruneCondition> =
        serde_json::from_value(json!([{ "column": "id", "op": "=", "value": 42 }])).unwrap();
    let predicate = SourcePredicate::resolve(&conditions, builder.schema()).unwrap();
    let kept =
        crate::parquet_prune::keep_ranges(&predicate, builder.metadata(), builder.schema(), 0..5);
    assert_eq!(kept.ranges, vec![40..45]);
    assert_eq!((kept.groups_skipped, kept.page_rows_skipped), (4, 15));
    // Row groups 1..3 of the file: split-relative rows.
    let kept =
        crate::parquet_prune::keep_ranges(&predicate, builder.metadata(), builder.schema(), 1..3);
    assert_eq!(kept.ranges, vec![20..25]);
    assert_eq!((kept.groups_skipped, kept.page_rows_skipped), (1, 15));
}
