//! Tests of topics of changes: Debezium events and upsert records decoded into rows with kinds
//! (bad events rejected as bad records), and updating rows encoded as Debezium events or as
//! upserts and tombstones.

#![allow(clippy::unwrap_used)]

use super::test_support::{message, rows};
use super::{Format, MetadataKey, RecordDecoder, RecordEncoder, RecordLayout};
use arrow::array::{Int8Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use std::sync::Arc;
use weir_api::{BadRecordPolicy, Error, RowKind};

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, false),
        Field::new("offset", DataType::Int64, false),
    ]))
}

fn layout(value_format: Format, key: bool, upsert: bool, prefix: &str) -> RecordLayout {
    RecordLayout {
        key_format: key.then_some(Format::Json),
        value_format,
        key_columns: if key { vec![0] } else { vec![] },
        value_columns: if key { vec![1] } else { vec![0, 1] },
        metadata: vec![(2, MetadataKey::parse("offset", "test").unwrap())],
        upsert,
        key_prefix: prefix.to_owned(),
    }
}

#[test]
fn debezium_events_become_rows_with_kinds_and_a_bad_one_is_named() {
    let mut decoder = RecordDecoder::new(
        schema(),
        layout(Format::DebeziumJson, false, false, ""),
        BadRecordPolicy::Fail,
    )
    .unwrap();
    let events: [&[u8]; 4] = [
        br#"{"before":null,"after":{"id":1,"name":"a"},"op":"r","source":{"table":"t"}}"#,
        br#"{"before":{"id":1,"name":"a"},"after":{"id":1,"name":"b"},"op":"u"}"#,
        br#"{"before":{"id":1,"name":"b"},"after":null,"op":"d"}"#,
        br#"{"after":{"id":2,"name":"c"},"op":"c"}"#,
    ];
    let mut messages: Vec<_> = events
        .iter()
        .enumerate()
        .map(|(i, e)| message(i as i64, None, Some(e)))
        .collect();
    // A tombstone after the delete is skipped.
    messages.insert(3, message(9, None, None));
    let decoded = decoder.decode(&messages).unwrap();
    assert_eq!(
        rows(&decoded.data),
        ["1|a|0|0", "1|a|1|1", "1|b|1|2", "1|b|2|3", "2|c|3|0"],
        "id|name|offset|kind"
    );
    let bad = [message(7, None, Some(br#"{"after":{"id":3},"op":"c"}"#))];
    let Err(Error::BadRecord { location, message }) = decoder.decode(&bad) else {
        panic!("a bad event");
    };
    assert_eq!(location.line, Some(7));
    assert!(
        message.contains("column `name`, which is not nullable"),
        "{message}"
    );
}

#[test]
fn upsert_records_are_updates_and_tombstones_deletes_keyed_from_the_key() {
    let mut decoder = RecordDecoder::new(
        schema(),
        layout(Format::Json, true, true, ""),
        BadRecordPolicy::Fail,
    )
    .unwrap();
    let messages = [
        message(0, Some(br#"{"id":1}"#), Some(br#"{"name":"a"}"#)),
        message(1, Some(br#"{"id":1}"#), None),
    ];
    let decoded = decoder.decode(&messages).unwrap();
    assert_eq!(rows(&decoded.data), ["1|a|0|2", "1|∅|1|3"]);
    assert!(decoded.data.schema().field(1).is_nullable());
}

fn updating(kinds: &[RowKind]) -> RecordBatch {
    let n = kinds.len() as i64;
    let mut fields: Vec<Field> = schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields[0] = fields[0].clone().with_name("k_id");
    fields.pop();
    fields.push(weir_api::changelog::row_kind_field());
    RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        vec![
            Arc::new(Int64Array::from_iter_values(0..n)),
            Arc::new(StringArray::from_iter_values(
                (0..n).map(|i| format!("n{i}")),
            )),
            Arc::new(Int8Array::from_iter_values(kinds.iter().map(|k| k.as_i8()))),
        ],
    )
    .unwrap()
}

fn texts(values: &arrow::array::BinaryArray) -> Vec<Option<String>> {
    values
        .iter()
        .map(|v| v.map(|b| String::from_utf8(b.to_vec()).unwrap()))
        .collect()
}

#[test]
fn an_upsert_sink_writes_updates_as_values_and_deletes_as_tombstones() {
    use RowKind::*;
    let batch = updating(&[Insert, UpdateBefore, UpdateAfter, Delete]);
    let layout = RecordLayout {
        key_format: Some(Format::Json),
        value_format: Format::Json,
        key_columns: vec![0],
        value_columns: vec![1],
        metadata: vec![],
        upsert: true,
        key_prefix: "k_".to_owned(),
    };
    let mut encoder = RecordEncoder::new(batch.schema(), layout).unwrap();
    let encoded = encoder.encode(&batch).unwrap();
    assert_eq!(
        texts(encoded.keys.as_ref().unwrap()),
        [
            Some(r#"{"id":0}"#.to_owned()),
            Some(r#"{"id":2}"#.to_owned()),
            Some(r#"{"id":3}"#.to_owned())
        ],
        "the update-before is left out; the key has the prefix taken off"
    );
    assert_eq!(
        texts(&encoded.values),
        [
            Some(r#"{"name":"n0"}"#.to_owned()),
            Some(r#"{"name":"n2"}"#.to_owned()),
            None
        ]
    );
}

#[test]
fn a_debezium_sink_writes_additions_after_and_removals_before() {
    use RowKind::*;
    let batch = updating(&[Insert, Delete]);
    let layout = RecordLayout {
        key_format: None,
        value_format: Format::DebeziumJson,
        key_columns: vec![],
        value_columns: vec![0, 1],
        metadata: vec![],
        upsert: false,
        key_prefix: String::new(),
    };
    let mut encoder = RecordEncoder::new(batch.schema(), layout).unwrap();
    let encoded = encoder.encode(&batch).unwrap();
    assert_eq!(
        texts(&encoded.values),
        [
            Some(r#"{"before":null,"after":{"k_id":0,"name":"n0"},"op":"c"}"#.to_owned()),
            Some(r#"{"before":{"k_id":1,"name":"n1"},"after":null,"op":"d"}"#.to_owned()),
        ]
    );
}
