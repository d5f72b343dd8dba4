//! Tests of the encoder: encode-then-decode round trips in every format, and the sink's checks.

#![allow(clippy::unwrap_used)]

use super::test_support::rows;
use super::{Encoded, Format, MetadataKey, RecordDecoder, RecordEncoder, RecordLayout};
use arrow::array::{
    Array, ArrayRef, BinaryArray, BinaryBuilder, Int64Array, MapBuilder, RecordBatch, StringArray,
    StringBuilder, TimestampMillisecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use rdkafka::message::{Header, OwnedHeaders, OwnedMessage, Timestamp};
use std::sync::Arc;
use weir_api::BadRecordPolicy;

/// The headers of one row: `(name, value)` pairs.
type Pairs<'a> = &'a [(&'a str, Option<&'a [u8]>)];

/// A headers column of `rows` rows.
fn headers_column(rows: &[Pairs<'_>]) -> ArrayRef {
    let mut builder = MapBuilder::new(None, StringBuilder::new(), BinaryBuilder::new());
    for row in rows {
        for (name, value) in *row {
            builder.keys().append_value(name);
            builder.values().append_option(*value);
        }
        builder.append(true).unwrap();
    }
    Arc::new(builder.finish())
}

/// A sink table: `id` (key), `user` and `price` (value), `ts` and `h` (metadata).
fn sink_table(key: Format, value: Format) -> (SchemaRef, RecordLayout, RecordBatch) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("user", DataType::Utf8, false),
        Field::new("price", DataType::Int64, true),
        Field::new("ts", MetadataKey::Timestamp.data_type(), true),
        Field::new("h", MetadataKey::Headers.data_type(), false),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from(vec![Some(1), None, Some(3)])),
            Arc::new(StringArray::from(vec!["plain", "a,\"quoted\"\nline", "z"])),
            Arc::new(Int64Array::from(vec![Some(10), Some(-2), None])),
            Arc::new(
                TimestampMillisecondArray::from(vec![Some(1_500), None, Some(0)])
                    .with_timezone("UTC"),
            ),
            headers_column(&[
                &[("trace", Some(b"t1")), ("flag", None)],
                &[],
                &[("x", Some(b"\x00\xff"))],
            ]),
        ],
    )
    .unwrap();
    let layout = RecordLayout {
        key_format: Some(key),
        value_format: value,
        key_columns: vec![0],
        value_columns: vec![1, 2],
        metadata: vec![(3, MetadataKey::Timestamp), (4, MetadataKey::Headers)],
        upsert: false,
        key_prefix: String::new(),
    };
    (schema, layout, batch)
}

/// The messages a producer would send for `encoded`, at offsets 0, 1, ...
fn messages(encoded: &Encoded) -> Vec<OwnedMessage> {
    let bytes = |a: &BinaryArray, i: usize| a.is_valid(i).then(|| a.value(i).to_vec());
    (0..encoded.values.len())
        .map(|i| {
            let timestamp = encoded
                .timestamps
                .as_ref()
                .and_then(|t| t[i])
                .map_or(Timestamp::NotAvailable, Timestamp::CreateTime);
            let headers = encoded.headers.as_ref().map(|h| {
                h[i].iter().fold(OwnedHeaders::new(), |all, (key, value)| {
                    all.insert(Header {
                        key,
                        value: value.as_deref(),
                    })
                })
            });
            OwnedMessage::new(
                bytes(&encoded.values, i),
                encoded.keys.as_ref().and_then(|k| bytes(k, i)),
                "bids".to_owned(),
                timestamp,
                3,
                i as i64,
                headers,
            )
        })
        .collect()
}

/// Encodes `batch`, decodes the messages with the same schema and layout, and checks the rows
/// come back unchanged; returns the encoded parts.
fn round_trip(schema: SchemaRef, layout: RecordLayout, batch: &RecordBatch) -> Encoded {
    let mut encoder = RecordEncoder::new(schema.clone(), layout.clone()).unwrap();
    let encoded = encoder.encode(batch).unwrap();
    assert_eq!(encoded.values.len(), batch.num_rows());
    let mut decoder = RecordDecoder::new(schema, layout, BadRecordPolicy::Fail).unwrap();
    let decoded = decoder.decode(&messages(&encoded)).unwrap();
    assert!(decoded.dead_letters.is_none());
    assert_eq!(rows(&decoded.data), rows(batch));
    encoded
}

/// Each value as lossy UTF-8 text (null as `∅`).
fn texts(values: &BinaryArray) -> Vec<String> {
    values
        .iter()
        .map(|v| {
            v.map_or("∅".to_owned(), |v| {
                String::from_utf8_lossy(v).into_owned()
            })
        })
        .collect()
}

#[test]
fn json_round_trips_with_keys_headers_and_timestamps() {
    let (schema, layout, batch) = sink_table(Format::Json, Format::Json);
    let encoded = round_trip(schema, layout, &batch);
    assert_eq!(
        texts(&encoded.values),
        [
            r#"{"user":"plain","price":10}"#,
            r#"{"user":"a,\"quoted\"\nline","price":-2}"#,
            r#"{"user":"z"}"#,
        ]
    );
    assert_eq!(
        texts(encoded.keys.as_ref().unwrap()),
        [r#"{"id":1}"#, "{}", r#"{"id":3}"#]
    );
    assert_eq!(encoded.timestamps, Some(vec![Some(1_500), None, Some(0)]));
    assert_eq!(
        encoded.headers,
        Some(vec![
            vec![
                ("trace".to_owned(), Some(b"t1".to_vec())),
                ("flag".to_owned(), None)
            ],
            vec![],
            vec![("x".to_owned(), Some(vec![0, 255]))],
        ])
    );
}

#[test]
fn csv_round_trips_quotes_delimiters_and_line_feeds() {
    let csv = Format::Csv { delimiter: b',' };
    let (schema, layout, batch) = sink_table(csv, csv);
    let encoded = round_trip(schema, layout, &batch);
    assert_eq!(
        texts(&encoded.values),
        ["plain,10", "\"a,\"\"quoted\"\"\nline\",-2", "z,"]
    );
    assert_eq!(texts(encoded.keys.as_ref().unwrap()), ["1", "\"\"", "3"]);
    let tab = Format::Csv { delimiter: b'\t' };
    let (schema, layout, batch) = sink_table(tab, tab);
    let encoded = round_trip(schema, layout, &batch);
    assert_eq!(texts(&encoded.values)[0], "plain\t10");
}

#[test]
fn raw_round_trips_text_bytes_and_null_values() {
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Binary, true),
        Field::new("v", DataType::Utf8, true),
        Field::new("ts", DataType::Timestamp(TimeUnit::Millisecond, None), true),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(BinaryArray::from(vec![
                Some(&b"\x01k"[..]),
                None,
                Some(&b""[..]),
            ])),
            Arc::new(StringArray::from(vec![
                Some("héllo\nworld"),
                Some("x"),
                None,
            ])),
            Arc::new(TimestampMillisecondArray::from(vec![
                Some(5),
                Some(6),
                None,
            ])),
        ],
    )
    .unwrap();
    let layout = RecordLayout {
        key_format: Some(Format::Raw),
        value_format: Format::Raw,
        key_columns: vec![0],
        value_columns: vec![1],
        metadata: vec![(2, MetadataKey::Timestamp)],
        upsert: false,
        key_prefix: String::new(),
    };
    let encoded = round_trip(schema, layout, &batch);
    assert_eq!(texts(&encoded.values), ["héllo\nworld", "x", "∅"]);
    assert_eq!(encoded.keys.as_ref().unwrap().null_count(), 1);
    assert!(encoded.headers.is_none());
}

#[test]
fn ten_thousand_json_rows_give_ten_thousand_values() {
    let schema = Arc::new(Schema::new(vec![
        Field::new("n", DataType::Int64, false),
        Field::new("s", DataType::Utf8, true),
    ]));
    let n = 10_000;
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from_iter_values(0..n)),
            Arc::new(StringArray::from_iter_values(
                (0..n).map(|i| format!("line\n{i}")),
            )),
        ],
    )
    .unwrap();
    let layout = RecordLayout {
        key_format: None,
        value_format: Format::Json,
        key_columns: vec![],
        value_columns: vec![0, 1],
        metadata: vec![],
        upsert: false,
        key_prefix: String::new(),
    };
    let mut encoder = RecordEncoder::new(schema, layout).unwrap();
    let encoded = encoder.encode(&batch).unwrap();
    assert_eq!(encoded.values.len(), n as usize);
    assert!(encoded.keys.is_none() && encoded.timestamps.is_none());
    for i in [0, 1, 4_999, 9_999] {
        assert_eq!(
            encoded.values.value(i as usize),
            format!(r#"{{"n":{i},"s":"line\n{i}"}}"#).as_bytes()
        );
    }
    // A slice of a batch encodes only its rows.
    let slice = encoder.encode(&batch.slice(9_998, 2)).unwrap();
    assert_eq!(texts(&slice.values)[1], r#"{"n":9999,"s":"line\n9999"}"#);
}

#[test]
fn sinks_refuse_read_only_and_repeated_metadata() {
    let err = |fields: Vec<Field>, metadata: Vec<(usize, MetadataKey)>| {
        let layout = RecordLayout {
            key_format: None,
            value_format: Format::Json,
            key_columns: vec![],
            value_columns: vec![0],
            metadata,
            upsert: false,
            key_prefix: String::new(),
        };
        let mut all = vec![Field::new("v", DataType::Utf8, true)];
        all.extend(fields);
        RecordEncoder::new(Arc::new(Schema::new(all)), layout)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        err(
            vec![Field::new("off", DataType::Int64, true)],
            vec![(1, MetadataKey::Offset)]
        ),
        "schema error in kafka sink: column `off` holds the Kafka metadata `offset`, which is \
         read-only: a sink writes only `headers` and `timestamp`"
    );
    let ts = |name: &str| Field::new(name, MetadataKey::Timestamp.data_type(), true);
    let e = err(
        vec![ts("a"), ts("b")],
        vec![(1, MetadataKey::Timestamp), (2, MetadataKey::Timestamp)],
    );
    assert!(
        e.contains("columns `a` and `b` both hold the Kafka metadata `timestamp`"),
        "{e}"
    );
    let e = err(
        vec![Field::new("h", DataType::Binary, true)],
        vec![(1, MetadataKey::Headers)],
    );
    assert!(
        e.contains("column `h`") && e.contains("Map<Utf8, Binary>"),
        "{e}"
    );
}
