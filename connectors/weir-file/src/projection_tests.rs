//! Projection pushdown: a file source asked for some of its columns decodes only those, and
//! only those can reject a record.

#![allow(clippy::unwrap_used)]

use crate::test_support::{bad_record, prepare, read_all, read_split, write};
use arrow::array::{ArrayRef, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use serde_json::json;
use std::sync::Arc;
use weir_api::{BadRecordPolicy, PreparedSource};

fn declared() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
        Field::new("price", DataType::Int64, false),
        Field::new("qty", DataType::Int64, false),
    ]))
}

async fn projected(path: &str, policy: BadRecordPolicy) -> Arc<dyn PreparedSource> {
    let source = prepare(
        json!({ "path": path, "batch_size": 2 }),
        Some(declared()),
        policy,
    )
    .await
    .unwrap();
    let narrow = source.project(&[0, 2]).unwrap();
    let schema = narrow.schema();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, ["id", "price"]);
    assert!(
        narrow.describe().ends_with("; reads id, price"),
        "{}",
        narrow.describe()
    );
    narrow
}

#[tokio::test]
async fn csv_and_json_decode_and_check_only_the_columns_read() {
    let dir = tempfile::tempdir().unwrap();
    // `qty` is not a number on line 3 (record 2), and `price` is not one on line 5 (record 4).
    let csv = "id,name,price,qty\n1,a,10,1\n2,b,20,many\n3,\"c,d\",30,3\n4,d,cheap,4\n5,e,50,5\n";
    let jsonl = "{\"id\":1,\"name\":\"a\",\"price\":10,\"qty\":1}\n\
                 {\"id\":2,\"name\":\"b\",\"price\":20,\"qty\":\"many\"}\n\
                 {\"id\":3,\"price\":30,\"qty\":3}\n\
                 {\"id\":4,\"name\":\"d\",\"price\":\"cheap\",\"qty\":4}\n\
                 {\"id\":5,\"name\":\"e\",\"price\":50,\"qty\":5}\n";
    for (name, text, bad_line) in [("p.csv", csv, 5), ("p.jsonl", jsonl, 4)] {
        let path = write(dir.path(), name, text);
        // Reading every column rejects both records.
        let all = prepare(
            json!({ "path": path }),
            Some(declared()),
            BadRecordPolicy::DeadLetter,
        )
        .await
        .unwrap();
        let split = all.enumerate_splits().await.unwrap().remove(0);
        assert_eq!(
            read_split(&all, &split).await.unwrap().dead_letters.len(),
            2,
            "{name}"
        );
        // Reading id and price: only the bad price rejects its record.
        let source = projected(&path, BadRecordPolicy::DeadLetter).await;
        let read = read_split(&source, &split).await.unwrap();
        assert_eq!(read.rows, ["1|10", "2|20", "3|30", "5|50"], "{name}");
        assert_eq!(
            read.dead_letters.len(),
            1,
            "{name}: {:?}",
            read.dead_letters
        );
        assert!(
            read.dead_letters[0].contains("price"),
            "{name}: {:?}",
            read.dead_letters
        );
        let err = read_all(&projected(&path, BadRecordPolicy::Fail).await)
            .await
            .unwrap_err();
        let (_, line, column, _) = bad_record(err);
        assert_eq!(
            (line, column.as_deref()),
            (Some(bad_line), Some("price")),
            "{name}"
        );
    }
}

#[tokio::test]
async fn parquet_reads_only_the_columns_read() {
    let dir = tempfile::tempdir().unwrap();
    let batch = RecordBatch::try_from_iter([
        ("id", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef),
        (
            "name",
            Arc::new(StringArray::from(vec!["a", "b"])) as ArrayRef,
        ),
        (
            "price",
            Arc::new(Int64Array::from(vec![10, 20])) as ArrayRef,
        ),
        ("qty", Arc::new(Int64Array::from(vec![7, 8])) as ArrayRef),
    ])
    .unwrap();
    let mut out = Vec::new();
    let mut writer = parquet::arrow::ArrowWriter::try_new(&mut out, batch.schema(), None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    let path = write(dir.path(), "p.parquet", out);
    let source = projected(&path, BadRecordPolicy::Fail).await;
    assert_eq!(read_all(&source).await.unwrap(), ["1|10", "2|20"]);
}
