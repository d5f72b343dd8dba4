//! Tests of the file source: formats, schemas, cursors, errors, partitioned tables.

#![allow(clippy::unwrap_used)]

use super::*;
use crate::test_support::{OPTIONS_PATH, ctx, prepare, read_all, read_split, spec, write};
use arrow::array::{ArrayRef, Int32Array, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use object_store::ObjectStoreExt;
use serde_json::json;

fn schema(fields: &[(&str, DataType, bool)]) -> SchemaRef {
    Arc::new(Schema::new(
        fields
            .iter()
            .map(|(name, ty, nullable)| Field::new(*name, ty.clone(), *nullable))
            .collect::<Vec<_>>(),
    ))
}

fn write_parquet(dir: &std::path::Path, relative: &str, batch: &RecordBatch) -> String {
    let mut out = Vec::new();
    let mut writer =
        parquet::arrow::ArrowWriter::try_new(&mut out, batch.schema(), None).expect("writer");
    writer.write(batch).expect("write");
    writer.close().expect("close");
    write(dir, relative, out)
}

#[tokio::test]
async fn reads_csv_globs_with_an_inferred_schema() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "data/b.csv", "id,name,price\n3,z,0.5\n");
    write(dir.path(), "data/a.csv", "id,name,price\n1,x,1.5\n2,,2\n");
    write(dir.path(), "data/c.json", "{}");
    let path = format!("{}/data/*.csv", dir.path().display());
    let source = prepare(json!({ "path": path }), None, BadRecordPolicy::Fail)
        .await
        .unwrap();
    assert_eq!(
        source.schema(),
        schema(&[
            ("id", DataType::Int64, true),
            ("name", DataType::Utf8, true),
            ("price", DataType::Float64, true),
        ])
    );
    let splits = source.enumerate_splits().await.unwrap();
    let ids: Vec<_> = splits.iter().map(|s| s.id.clone()).collect();
    let base = dir.path().display();
    assert_eq!(
        ids,
        [format!("{base}/data/a.csv"), format!("{base}/data/b.csv")]
    );
    assert_eq!(splits[0].size_bytes, Some(27));
    assert_eq!(
        read_all(&source).await.unwrap(),
        ["1|x|1.5", "2|∅|2.0", "3|z|0.5"]
    );
    assert_eq!(source.describe(), format!("file: csv {path}"));
    assert_eq!(source.capabilities(), [SourceCapability::Replayable]);
    assert_eq!(source.boundedness(), Boundedness::Bounded);
}

#[tokio::test]
async fn reads_csv_with_a_declared_schema_and_options() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "x.txt", "1;a\r\n2;\"b;c\"\r\n");
    let declared = schema(&[("n", DataType::Int32, false), ("s", DataType::Utf8, true)]);
    let options = json!({ "path": path, "format": "csv", "delimiter": ";", "has_header": false });
    let source = prepare(options, Some(declared.clone()), BadRecordPolicy::Fail)
        .await
        .unwrap();
    assert_eq!(source.schema(), declared);
    assert_eq!(read_all(&source).await.unwrap(), ["1|a", "2|b;c"]);
}

#[tokio::test]
async fn reads_json_lines_declared_and_inferred() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "in/events.jsonl",
        "{\"user\":\"a\",\"n\":1}\n\n{\"user\":\"b\",\"n\":2,\"extra\":true}\n",
    );
    let path = format!("{}/in/", dir.path().display());
    let source = prepare(json!({ "path": path }), None, BadRecordPolicy::Fail)
        .await
        .unwrap();
    // Columns in order of first appearance; keys of one object in name order.
    assert_eq!(
        source.schema(),
        schema(&[
            ("n", DataType::Int64, true),
            ("user", DataType::Utf8, true),
            ("extra", DataType::Boolean, true),
        ])
    );
    assert_eq!(read_all(&source).await.unwrap(), ["1|a|∅", "2|b|true"]);
    let declared = schema(&[
        ("n", DataType::Int32, false),
        ("user", DataType::Utf8, true),
    ]);
    let source = prepare(
        json!({ "path": path, "format": "json" }),
        Some(declared),
        BadRecordPolicy::Fail,
    )
    .await
    .unwrap();
    assert_eq!(read_all(&source).await.unwrap(), ["1|a", "2|b"]);
}

#[tokio::test]
async fn reads_parquet_declared_and_inferred() {
    let dir = tempfile::tempdir().unwrap();
    let batch = RecordBatch::try_from_iter([
        ("id", Arc::new(Int32Array::from(vec![1, 2, 3])) as ArrayRef),
        (
            "name",
            Arc::new(StringArray::from(vec!["a", "b", "c"])) as ArrayRef,
        ),
    ])
    .unwrap();
    let path = write_parquet(dir.path(), "t.parquet", &batch);
    let source = prepare(json!({ "path": path }), None, BadRecordPolicy::Fail)
        .await
        .unwrap();
    assert_eq!(source.schema().fields().len(), 2);
    assert_eq!(read_all(&source).await.unwrap(), ["1|a", "2|b", "3|c"]);

    // Declared: columns by name, widened, and a missing nullable column reads as null.
    let declared = schema(&[
        ("name", DataType::Utf8, false),
        ("id", DataType::Int64, false),
        ("missing", DataType::Float64, true),
    ]);
    let source = prepare(
        json!({ "path": path }),
        Some(declared),
        BadRecordPolicy::Fail,
    )
    .await
    .unwrap();
    assert_eq!(
        read_all(&source).await.unwrap(),
        ["a|1|∅", "b|2|∅", "c|3|∅"]
    );
}

#[tokio::test]
async fn a_cursor_resumes_at_exactly_the_remaining_rows() {
    let dir = tempfile::tempdir().unwrap();
    let ids: Vec<i64> = (0..10).collect();
    let mut csv = String::from("id,note\n");
    let mut jsonl = String::new();
    for id in &ids {
        csv.push_str(&format!("{id},\"n\n{id}\"\r\n"));
        jsonl.push_str(&format!("{{\"id\":{id}}}\n\n"));
    }
    write(dir.path(), "r.csv", csv);
    write(dir.path(), "r.json", jsonl);
    let batch =
        RecordBatch::try_from_iter([("id", Arc::new(Int64Array::from(ids.clone())) as ArrayRef)])
            .unwrap();
    let mut out = Vec::new();
    let props = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(4))
        .build();
    let mut writer =
        parquet::arrow::ArrowWriter::try_new(&mut out, batch.schema(), Some(props)).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    write(dir.path(), "r.parquet", out);
    for file in ["r.csv", "r.json", "r.parquet"] {
        let path = format!("{}/{file}", dir.path().display());
        let source = prepare(
            json!({ "path": path, "batch_size": 3 }),
            None,
            BadRecordPolicy::Fail,
        )
        .await
        .unwrap();
        let split = source.enumerate_splits().await.unwrap().remove(0);
        let all = read_split(&source, &split).await.unwrap();
        assert_eq!(all.rows.len(), 10, "{file}");
        assert_eq!(all.cursors.last(), Some(&10), "{file}");
        assert!(all.cursors.windows(2).all(|w| w[0] < w[1]), "{file}");
        for start in 0..=11u64 {
            let mut resumed = split.clone();
            resumed.cursor.next_record = start;
            let rest = read_split(&source, &resumed).await.unwrap();
            let expected = &all.rows[(start as usize).min(10)..];
            assert_eq!(rest.rows, expected, "{file} from {start}");
            if start < 10 {
                assert_eq!(rest.cursors.last(), Some(&10), "{file} from {start}");
            }
        }
    }
}

#[tokio::test]
async fn nothing_matching_is_a_config_error_naming_the_path_option() {
    let dir = tempfile::tempdir().unwrap();
    let path = format!("{}/none/*.csv", dir.path().display());
    let err = prepare(json!({ "path": path }), None, BadRecordPolicy::Fail)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Config { path, .. } if path == &format!("{OPTIONS_PATH}.path")),
        "{err}"
    );
    let declared = schema(&[("a", DataType::Utf8, true)]);
    let source = prepare(
        json!({ "path": path }),
        Some(declared),
        BadRecordPolicy::Fail,
    )
    .await
    .unwrap();
    let err = source.enumerate_splits().await.unwrap_err();
    assert!(err.to_string().contains("no files match"), "{err}");
    assert!(
        matches!(&err, Error::Config { path, .. } if path == &format!("{OPTIONS_PATH}.path")),
        "{err}"
    );
}

#[tokio::test]
async fn an_unknown_extension_needs_a_format() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "d/a.csv", "a\n1\n");
    write(dir.path(), "d/b.txt", "a\n1\n");
    let path = format!("{}/d", dir.path().display());
    let err = prepare(json!({ "path": path }), None, BadRecordPolicy::Fail)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Config { path, .. } if path == &format!("{OPTIONS_PATH}.format")),
        "{err}"
    );
    let source = prepare(
        json!({ "path": path, "format": "csv" }),
        None,
        BadRecordPolicy::Fail,
    )
    .await
    .unwrap();
    assert_eq!(read_all(&source).await.unwrap(), ["1", "1"]);
}

#[tokio::test]
async fn csv_cannot_declare_nested_types() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "a.csv", "a\n1\n");
    let declared = schema(&[(
        "a",
        DataType::List(Arc::new(Field::new("item", DataType::Int32, true))),
        true,
    )]);
    let err = prepare(
        json!({ "path": path }),
        Some(declared),
        BadRecordPolicy::Fail,
    )
    .await
    .unwrap_err();
    assert!(matches!(err, Error::Schema { .. }), "{err}");
}

#[tokio::test]
async fn memory_urls_resolve_through_the_shared_registry() {
    let registry: Arc<dyn ObjectStoreRegistry> = Arc::new(DefaultObjectStoreRegistry::new());
    let url = url::Url::parse("memory:///in/a.csv").unwrap();
    let (store, path) = registry.resolve(&url).unwrap();
    store.put(&path, "x\n1\n2\n".into()).await.unwrap();
    let options = json!({ "path": "memory:///in/*.csv" });
    let source = FileSourceFactory::with_registry(registry)
        .prepare(spec(&options, None, BadRecordPolicy::Fail))
        .await
        .unwrap();
    let splits = source.enumerate_splits().await.unwrap();
    assert_eq!(splits[0].id, "memory:///in/a.csv");
    let mut reader = source.open_split(&splits[0], &ctx(0)).await.unwrap();
    let batch = reader.next_batch().await.unwrap().unwrap();
    assert_eq!(batch.data.num_rows(), 2);
}
