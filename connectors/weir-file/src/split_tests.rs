//! Files read as several splits: byte ranges of CSV and JSON lines aligned to line starts,
//! groups of row groups of Parquet. Every split size must give exactly the rows of reading the
//! file whole, in order, and cursors inside a range must resume exactly.

#![allow(clippy::unwrap_used)]

use crate::source::group_row_groups;
use crate::test_support::{bad_record, prepare, read_all, read_split, write};
use arrow::array::{ArrayRef, Int64Array, StringArray};
use arrow::record_batch::RecordBatch;
use serde_json::json;
use std::sync::Arc;
use weir_api::{BadRecordPolicy, Error, PreparedSource, SplitRange};

/// Prepares a source over `path` with `split_size` and a batch size of 3.
async fn source(path: &str, split_size: u64) -> Arc<dyn PreparedSource> {
    prepare(
        json!({ "path": path, "split_size": split_size, "batch_size": 3 }),
        None,
        BadRecordPolicy::Fail,
    )
    .await
    .unwrap()
}

/// Reading with every split size from 1 byte to past the file's size gives the rows of the
/// unsplit file; returns how many splits the smallest size made.
async fn every_split_size_reads_the_same_rows(path: &str, size: u64) -> usize {
    let whole = read_all(&source(path, 0).await).await.unwrap();
    assert!(!whole.is_empty());
    let mut most = 0;
    for split_size in 1..=size + 1 {
        let source = source(path, split_size).await;
        let splits = source.enumerate_splits().await.unwrap();
        most = most.max(splits.len());
        if split_size >= size {
            assert_eq!(splits.len(), 1, "{path} at {split_size}");
            assert_eq!(splits[0].range, None);
        }
        assert_eq!(
            read_all(&source).await.unwrap(),
            whole,
            "{path} with splits of {split_size} bytes"
        );
    }
    most
}

#[tokio::test]
async fn csv_byte_ranges_cover_the_file_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    // A byte order mark, a header, CRLF and LF endings, an empty line, quoted delimiters and
    // escaped quotes (no line breaks inside quotes), no final line feed.
    let text = "\u{feff}id,name,note\r\n1,a,\"x,y\"\r\n2,bb,\"say \"\"hi\"\"\"\n\n3,,z\n\
                4,dddd,\"\"\n5,e,last";
    let path = write(dir.path(), "t.csv", text);
    let splits = every_split_size_reads_the_same_rows(&path, text.len() as u64).await;
    assert!(splits > 10, "{splits}");
    let source = source(&path, 16).await;
    let ids: Vec<String> = source
        .enumerate_splits()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(ids[0], format!("{path}#bytes=0-16"));
    assert_eq!(ids[1], format!("{path}#bytes=16-32"));
}

#[tokio::test]
async fn json_lines_byte_ranges_cover_the_file_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let text = "{\"id\":1,\"s\":\"a\\nb\"}\n\n{\"id\":2,\"s\":\"{}\"}\r\n   \n{\"id\":3}\n{\"id\":4,\"s\":\"x\"}";
    let path = write(dir.path(), "t.jsonl", text);
    every_split_size_reads_the_same_rows(&path, text.len() as u64).await;
}

#[tokio::test]
async fn a_cursor_resumes_inside_a_range() {
    let dir = tempfile::tempdir().unwrap();
    let mut csv = String::from("id\n");
    let mut jsonl = String::new();
    for id in 0..40 {
        csv.push_str(&format!("{id}\n"));
        jsonl.push_str(&format!("{{\"id\":{id}}}\n"));
    }
    for (name, text) in [("r.csv", csv), ("r.jsonl", jsonl)] {
        let path = write(dir.path(), name, &text);
        let source = source(&path, 50).await;
        let splits = source.enumerate_splits().await.unwrap();
        assert!(splits.len() > 2, "{name}");
        let mut all = Vec::new();
        for split in &splits {
            let whole = read_split(&source, split).await.unwrap();
            for start in 0..=whole.rows.len() as u64 + 1 {
                let mut resumed = split.clone();
                resumed.cursor.next_record = start;
                let rest = read_split(&source, &resumed).await.unwrap();
                let skip = (start as usize).min(whole.rows.len());
                assert_eq!(rest.rows, whole.rows[skip..], "{} from {start}", split.id);
            }
            all.extend(whole.rows);
        }
        let want: Vec<String> = (0..40).map(|i| i.to_string()).collect();
        assert_eq!(all, want, "{name}");
    }
}

#[tokio::test]
async fn bad_records_in_a_range_name_the_file_and_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut csv = String::from("id,n\n");
    let mut jsonl = String::new();
    for i in 0..30 {
        let n = if i == 20 {
            "x".to_owned()
        } else {
            i.to_string()
        };
        csv.push_str(&format!("{i},{n}\n"));
        let n = if i == 20 {
            "\"x\"".to_owned()
        } else {
            i.to_string()
        };
        jsonl.push_str(&format!("{{\"id\":{i},\"n\":{n}}}\n"));
    }
    for (name, text, line) in [("b.csv", csv, 22), ("b.jsonl", jsonl, 21)] {
        let path = write(dir.path(), name, &text);
        let schema = Arc::new(arrow::datatypes::Schema::new(vec![
            arrow::datatypes::Field::new("id", arrow::datatypes::DataType::Int64, false),
            arrow::datatypes::Field::new("n", arrow::datatypes::DataType::Int64, false),
        ]));
        let source = prepare(
            json!({ "path": path, "split_size": 40, "batch_size": 4 }),
            Some(schema),
            BadRecordPolicy::Fail,
        )
        .await
        .unwrap();
        let err = read_all(&source).await.unwrap_err();
        let (input, got_line, column, message) = bad_record(err);
        assert_eq!(input, path, "{name}");
        assert_eq!(got_line, Some(line), "{name}: {message}");
        assert_eq!(column.as_deref(), Some("n"), "{name}");
    }
}

#[tokio::test]
async fn a_quoted_line_break_across_a_range_end_is_refused_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let text = "id,note\n1,\"first\nsecond\"\n2,plain\n3,\"x\ny\"\n";
    let path = write(dir.path(), "q.csv", text);
    // Reading whole: three records.
    assert_eq!(read_all(&source(&path, 0).await).await.unwrap().len(), 3);
    // A range ending inside the first quoted field (its end falls on "first\n").
    let source = source(&path, 12).await;
    let splits = source.enumerate_splits().await.unwrap();
    assert_eq!(splits[0].range, Some(SplitRange { start: 0, end: 12 }));
    let err = read_split(&source, &splits[0]).await.unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, Error::Schema { .. }), "{message}");
    assert!(message.contains("split_size"), "{message}");
    assert!(message.contains("line 2"), "{message}");
    // The range after it starts inside the record: its bad first record says why.
    let err = read_split(&source, &splits[1]).await.unwrap_err();
    let (_, _, _, message) = bad_record(err);
    assert!(message.contains("byte range at 17"), "{message}");
}

#[tokio::test]
async fn parquet_row_groups_make_splits() {
    let dir = tempfile::tempdir().unwrap();
    let ids: Vec<i64> = (0..30).collect();
    let names: Vec<String> = ids.iter().map(|i| format!("name-{i}")).collect();
    let batch = RecordBatch::try_from_iter([
        ("id", Arc::new(Int64Array::from(ids.clone())) as ArrayRef),
        ("name", Arc::new(StringArray::from(names)) as ArrayRef),
    ])
    .unwrap();
    let mut out = Vec::new();
    let props = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(4))
        .build();
    let mut writer =
        parquet::arrow::ArrowWriter::try_new(&mut out, batch.schema(), Some(props)).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    let size = out.len() as u64;
    let path = write(dir.path(), "t.parquet", out);
    let whole = read_all(&source(&path, 0).await).await.unwrap();
    assert_eq!(whole.len(), 30);
    // One byte per split: every row group (8 of them) is a split of its own.
    let source = source(&path, 1).await;
    let splits = source.enumerate_splits().await.unwrap();
    assert_eq!(splits.len(), 8);
    assert_eq!(splits[1].id, format!("{path}#row-groups=1-2"));
    assert_eq!(read_all(&source).await.unwrap(), whole);
    // Resuming inside a split skips rows of that split only.
    let mut resumed = splits[2].clone();
    resumed.cursor.next_record = 3;
    assert_eq!(
        read_split(&source, &resumed).await.unwrap().rows,
        ["11|name-11"]
    );
    // Larger splits gather row groups (fewer splits), all reading the same rows; a size past
    // the file is one split.
    let mut counts = Vec::new();
    for split_size in [1, 60, 120, 240, 480, size] {
        counts.push(source_splits(&path, split_size).await);
    }
    assert!(counts.windows(2).all(|w| w[0] >= w[1]), "{counts:?}");
    assert!(counts.iter().any(|n| (2..8).contains(n)), "{counts:?}");
    assert_eq!(counts.last(), Some(&1));
}

async fn source_splits(path: &str, split_size: u64) -> usize {
    let source = source(path, split_size).await;
    let n = source.enumerate_splits().await.unwrap().len();
    let whole = read_all(&self::source(path, 0).await).await.unwrap();
    assert_eq!(read_all(&source).await.unwrap(), whole);
    n
}

#[test]
fn row_groups_gather_until_the_split_size() {
    let r = |start, end| SplitRange { start, end };
    assert_eq!(
        group_row_groups(&[5, 5, 5, 5, 5], 10),
        [r(0, 2), r(2, 4), r(4, 5)]
    );
    assert_eq!(group_row_groups(&[20, 1, 1], 10), [r(0, 1), r(1, 3)]);
    assert_eq!(group_row_groups(&[], 10), []);
}
