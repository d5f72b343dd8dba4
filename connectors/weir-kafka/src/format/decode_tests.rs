//! Tests of the decoder: formats, keys, metadata, tombstones and bad records.

#![allow(clippy::unwrap_used)]

use super::test_support::{headers, message, rows};
use super::{Format, MetadataKey, RecordDecoder, RecordLayout};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use rdkafka::message::{OwnedMessage, Timestamp};
use std::sync::Arc;
use weir_api::{BadRecordPolicy, Error, dead_letter_schema};

/// `id` from the key; `user` (not null) and `price` from the value; then every metadata key.
fn table() -> (SchemaRef, RecordLayout) {
    let mut fields = vec![
        Field::new("id", DataType::Int64, true),
        Field::new("user", DataType::Utf8, false),
        Field::new("price", DataType::Int64, true),
    ];
    let keys = [
        "topic",
        "partition",
        "headers",
        "leader-epoch",
        "offset",
        "timestamp",
        "timestamp-type",
    ];
    let mut metadata = Vec::new();
    for (i, name) in keys.iter().enumerate() {
        let key = MetadataKey::parse(name, "test").unwrap();
        fields.push(Field::new(
            format!("m_{name}"),
            key.data_type(),
            key.nullable(),
        ));
        metadata.push((3 + i, key));
    }
    let layout = RecordLayout {
        key_format: Some(Format::Json),
        value_format: Format::Json,
        key_columns: vec![0],
        value_columns: vec![1, 2],
        metadata,
        upsert: false,
        key_prefix: String::new(),
    };
    (Arc::new(Schema::new(fields)), layout)
}

/// `user` and `price` from the value only, in `format`.
fn values_only(format: Format) -> (SchemaRef, RecordLayout) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("user", DataType::Utf8, false),
        Field::new("price", DataType::Int64, true),
    ]));
    let layout = RecordLayout {
        key_format: None,
        value_format: format,
        key_columns: vec![],
        value_columns: vec![0, 1],
        metadata: vec![],
        upsert: false,
        key_prefix: String::new(),
    };
    (schema, layout)
}

/// A decoder of `table` under `policy`.
fn decoder(table: (SchemaRef, RecordLayout), policy: BadRecordPolicy) -> RecordDecoder {
    RecordDecoder::new(table.0, table.1, policy).unwrap()
}

/// The `(input, offset, column, message)` of a bad-record error.
fn bad_record(err: Error) -> (String, Option<u64>, Option<String>, String) {
    let text = err.to_string();
    match err {
        Error::BadRecord { location, message } => {
            assert!(text.starts_with("bad record at bids/3:"), "{text}");
            (location.input, location.line, location.column, message)
        }
        other => panic!("expected a bad record, got {other}"),
    }
}

#[test]
fn json_decodes_keys_values_and_every_metadata_key() {
    let mut decoder = decoder(table(), BadRecordPolicy::Fail);
    let messages = vec![
        message(7, Some(br#"{"id":1}"#), Some(br#"{"user":"a","price":10}"#))
            .replace_headers(Some(headers(&[("trace", Some(b"x1")), ("empty", None)]))),
        message(8, None, Some(br#"{"user":"b","extra":true}"#))
            .set_timestamp(Timestamp::LogAppendTime(5)),
        message(
            9,
            Some(br#"{"id":3}"#),
            Some(br#"{"price":null,"user":"c"}"#),
        )
        .set_timestamp(Timestamp::NotAvailable)
        .set_topic("asks".to_owned())
        .set_partition(0),
    ];
    let decoded = decoder.decode(&messages).unwrap();
    assert!(decoded.dead_letters.is_none());
    assert_eq!(
        rows(&decoded.data),
        [
            "1|a|10|bids|3|{trace: 7831, empty: ∅}|∅|7|1970-01-01T00:00:01.007Z|CreateTime",
            "∅|b|∅|bids|3|{}|∅|8|1970-01-01T00:00:00.005Z|LogAppendTime",
            "3|c|∅|asks|0|{}|∅|9|∅|NoTimestampType",
        ]
    );
    assert_eq!(decoded.data.schema(), table().0);
}

#[test]
fn a_timestamp_column_may_be_declared_without_a_time_zone() {
    let schema = Arc::new(Schema::new(vec![
        Field::new("v", DataType::Binary, true),
        Field::new("ts", DataType::Timestamp(TimeUnit::Millisecond, None), true),
    ]));
    let layout = RecordLayout {
        key_format: None,
        value_format: Format::Raw,
        key_columns: vec![],
        value_columns: vec![0],
        metadata: vec![(1, MetadataKey::Timestamp)],
        upsert: false,
        key_prefix: String::new(),
    };
    let mut decoder = decoder((schema.clone(), layout), BadRecordPolicy::Fail);
    let decoded = decoder.decode(&[message(2, None, Some(b"\xff"))]).unwrap();
    assert_eq!(rows(&decoded.data), ["ff|1970-01-01T00:00:01.002"]);
    assert_eq!(decoded.data.schema(), schema);
}

#[test]
fn csv_decodes_by_position_with_its_delimiter() {
    let format = Format::parse("csv", "f")
        .unwrap()
        .with_field_delimiter(";", "d")
        .unwrap();
    let mut decoder = decoder(values_only(format), BadRecordPolicy::Fail);
    let messages = [
        message(0, None, Some(b"a;1")),
        message(1, None, Some(b"\"b;c\";\n")),
        message(2, None, Some(b"\"multi\nline\";3\r\n")),
    ];
    let decoded = decoder.decode(&messages).unwrap();
    assert_eq!(rows(&decoded.data), ["a|1", "b;c|∅", "multi\nline|3"]);
}

#[test]
fn raw_values_are_the_payloads_and_tombstones_are_null() {
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Binary, true),
        Field::new("v", DataType::Utf8, true),
    ]));
    let layout = RecordLayout {
        key_format: Some(Format::Raw),
        value_format: Format::Raw,
        key_columns: vec![0],
        value_columns: vec![1],
        metadata: vec![],
        upsert: false,
        key_prefix: String::new(),
    };
    let mut decoder = decoder((schema, layout), BadRecordPolicy::Fail);
    let messages = [
        message(0, Some(b"k0"), Some("héllo".as_bytes())),
        message(1, Some(b"k1"), None),
        message(2, None, Some(b"{\"not\": \"parsed\"}")),
    ];
    let decoded = decoder.decode(&messages).unwrap();
    assert_eq!(
        rows(&decoded.data),
        ["6b30|héllo", "6b31|∅", "∅|{\"not\": \"parsed\"}"]
    );
}

#[test]
fn json_and_csv_skip_tombstones() {
    for format in [Format::Json, Format::Csv { delimiter: b',' }] {
        let mut decoder = decoder(values_only(format), BadRecordPolicy::Fail);
        let (a, b): (&[u8], &[u8]) = match format {
            Format::Json => (br#"{"user":"a"}"#, br#"{"user":"b","price":2}"#),
            _ => (b"a,", b"b,2"),
        };
        let messages = [
            message(0, None, None),
            message(1, None, Some(a)),
            message(2, None, None),
            message(3, None, Some(b)),
        ];
        let decoded = decoder.decode(&messages).unwrap();
        assert_eq!(rows(&decoded.data), ["a|∅", "b|2"], "{format:?}");
        let only_tombstones = decoder.decode(&[message(4, None, None)]).unwrap();
        assert_eq!(only_tombstones.data.num_rows(), 0);
        assert!(only_tombstones.dead_letters.is_none());
    }
}

/// Good, bad, good, bad, good messages of `format` at offsets 10..15.
fn with_bad_records(format: Format) -> Vec<OwnedMessage> {
    let payloads: [&[u8]; 5] = match format {
        Format::Json => [
            br#"{"user":"a","price":1}"#,
            br#"{"user":"b","price":"many"}"#,
            br#"{"user":"c","price":3}"#,
            br#"{"user":"#,
            br#"{"user":"e","price":5}"#,
        ],
        _ => [b"a,1", b"b,many", b"c,3", b"d,4,extra", b"e,5"],
    };
    payloads
        .iter()
        .enumerate()
        .map(|(i, p)| message(10 + i as i64, None, Some(p)))
        .collect()
}

#[test]
fn a_bad_record_fails_the_read_naming_topic_partition_and_offset() {
    for format in [Format::Json, Format::Csv { delimiter: b',' }] {
        let mut decoder = decoder(values_only(format), BadRecordPolicy::Fail);
        let err = decoder.decode(&with_bad_records(format)).unwrap_err();
        let (input, offset, column, message) = bad_record(err);
        assert_eq!(input, "bids/3");
        assert_eq!(offset, Some(11));
        assert_eq!(column.as_deref(), Some("price"), "{message}");
        assert!(
            message.starts_with("the value at offset 11 has a bad value for column `price`"),
            "{message}"
        );
        assert!(message.contains("many"), "{message}");
    }
}

/// A value nested 50,000 levels deep overflowed the stack of arrow's decoder and aborted the
/// process; now it is a dead letter like any other bad record, and a nested value within the
/// limit is read.
#[test]
fn a_value_nested_too_deep_is_a_dead_letter_not_a_stack_overflow() {
    let deep = format!(
        "{{\"user\":\"x\",\"price\":{}1{}}}",
        "[".repeat(50_000),
        "]".repeat(50_000)
    );
    let within = format!(
        "{{\"user\":\"c\",\"price\":3,\"x\":{}1{}}}",
        "[".repeat(998),
        "]".repeat(998)
    );
    let payloads: [&[u8]; 3] = [
        br#"{"user":"a","price":1}"#,
        deep.as_bytes(),
        within.as_bytes(),
    ];
    let messages: Vec<OwnedMessage> = payloads
        .iter()
        .enumerate()
        .map(|(i, p)| message(20 + i as i64, None, Some(p)))
        .collect();
    let mut routing = decoder(values_only(Format::Json), BadRecordPolicy::DeadLetter);
    let decoded = routing.decode(&messages).unwrap();
    assert_eq!(rows(&decoded.data), ["a|1", "c|3"]);
    let dead = rows(&decoded.dead_letters.unwrap());
    assert_eq!(dead.len(), 1);
    assert!(
        dead[0].starts_with(
            "bids/3|21|∅|the value at offset 21 is bad: the JSON value nests objects and arrays \
             more than 1000 levels deep (at character 1020)"
        ),
        "{}",
        &dead[0][..300]
    );
    let mut failing = decoder(values_only(Format::Json), BadRecordPolicy::Fail);
    let (_, offset, _, message) = bad_record(failing.decode(&messages).unwrap_err());
    assert_eq!(offset, Some(21));
    assert!(message.contains("more than 1000 levels"), "{message}");
}

#[test]
fn dead_letters_keep_the_good_records_in_order() {
    for format in [Format::Json, Format::Csv { delimiter: b',' }] {
        let mut decoder = decoder(values_only(format), BadRecordPolicy::DeadLetter);
        let messages = with_bad_records(format);
        let decoded = decoder.decode(&messages).unwrap();
        assert_eq!(rows(&decoded.data), ["a|1", "c|3", "e|5"], "{format:?}");
        let dead = decoded.dead_letters.unwrap();
        assert_eq!(dead.schema(), dead_letter_schema());
        let dead = rows(&dead);
        assert_eq!(dead.len(), 2);
        let raw_b = String::from_utf8_lossy(rdkafka::Message::payload(&messages[1]).unwrap());
        assert!(
            dead[0].starts_with("bids/3|11|price|the value at offset 11 has a bad value"),
            "{}",
            dead[0]
        );
        assert!(dead[0].ends_with(&format!("|{raw_b}")), "{}", dead[0]);
        assert!(
            dead[1].starts_with("bids/3|13|∅|the value at offset 13 "),
            "{}",
            dead[1]
        );
        // The next call starts with no dead letters.
        let clean = decoder.decode(&messages[..1]).unwrap();
        assert!(clean.dead_letters.is_none());
        assert_eq!(rows(&clean.data), ["a|1"]);
    }
}

#[test]
fn malformed_payloads_say_what_is_wrong() {
    let reason = |format: Format, payload: &[u8]| {
        let mut decoder = decoder(values_only(format), BadRecordPolicy::Fail);
        let (_, offset, column, message) = bad_record(
            decoder
                .decode(&[message(5, None, Some(payload))])
                .unwrap_err(),
        );
        assert_eq!(offset, Some(5));
        (column, message)
    };
    let (column, message) = reason(Format::Json, br#"{"user":"a"} {"user":"b"}"#);
    assert_eq!(column, None);
    assert_eq!(
        message,
        "the value at offset 5 holds more than one json record"
    );
    let (column, message) = reason(Format::Json, b"{\"user\":");
    assert_eq!(column, None);
    assert!(
        message.starts_with("the value at offset 5 is not valid json"),
        "{message}"
    );
    let (column, message) = reason(Format::Json, b"  ");
    assert_eq!(column, None);
    assert_eq!(message, "the value at offset 5 holds no json record");
    let (column, message) = reason(Format::Json, b"[1,2]");
    assert_eq!(column, None);
    assert_eq!(
        message,
        "the value at offset 5 is not valid json: expected { got [1, 2]"
    );
    let missing_user =
        "the value at offset 5 has no value for column `user`, which is not nullable";
    let (column, message) = reason(Format::Json, br#"{"price":1}"#);
    assert_eq!(column.as_deref(), Some("user"));
    assert_eq!(message, missing_user);
    let (column, message) = reason(Format::Csv { delimiter: b',' }, b"a,1,2");
    assert_eq!(column, None);
    assert!(
        message.starts_with("the value at offset 5 is not a valid csv record"),
        "{message}"
    );
    let (column, message) = reason(Format::Csv { delimiter: b',' }, b",1");
    assert_eq!(column.as_deref(), Some("user"), "{message}");
    assert_eq!(message, missing_user);
    let (column, message) = reason(Format::Csv { delimiter: b',' }, b"a,1\nb,2");
    assert_eq!(column, None);
    assert_eq!(
        message,
        "the value at offset 5 holds more than one csv record"
    );
}

#[test]
fn invalid_utf8_in_a_raw_text_column_is_a_bad_record() {
    let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Utf8, true)]));
    let layout = RecordLayout {
        key_format: None,
        value_format: Format::Raw,
        key_columns: vec![],
        value_columns: vec![0],
        metadata: vec![],
        upsert: false,
        key_prefix: String::new(),
    };
    let mut decoder = decoder((schema, layout), BadRecordPolicy::DeadLetter);
    let messages = [
        message(0, None, Some(b"ok")),
        message(1, None, Some(b"bad \xff")),
        message(2, None, Some(b"fine")),
    ];
    let decoded = decoder.decode(&messages).unwrap();
    assert_eq!(rows(&decoded.data), ["ok", "fine"]);
    let dead = rows(&decoded.dead_letters.unwrap());
    assert_eq!(dead.len(), 1);
    assert!(
        dead[0].starts_with("bids/3|1|v|the value at offset 1 is not valid UTF-8"),
        "{}",
        dead[0]
    );
    assert!(dead[0].ends_with("|bad \u{fffd}"), "{}", dead[0]);
}

#[test]
fn missing_keys_and_timestamps_in_non_nullable_columns_are_bad_records() {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("user", DataType::Utf8, true),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            false,
        ),
    ]));
    let layout = RecordLayout {
        key_format: Some(Format::Csv { delimiter: b',' }),
        value_format: Format::Json,
        key_columns: vec![0],
        value_columns: vec![1],
        metadata: vec![(2, MetadataKey::Timestamp)],
        upsert: false,
        key_prefix: String::new(),
    };
    let mut decoder = decoder((schema, layout), BadRecordPolicy::DeadLetter);
    let value: &[u8] = br#"{"user":"u"}"#;
    let messages = [
        message(0, Some(b"1"), Some(value)),
        message(1, None, Some(value)),
        message(2, Some(b"3"), Some(value)).set_timestamp(Timestamp::NotAvailable),
        message(3, Some(b"4"), Some(value)),
        message(4, Some(b"four"), Some(value)),
    ];
    let decoded = decoder.decode(&messages).unwrap();
    assert_eq!(
        rows(&decoded.data),
        ["1|u|1970-01-01T00:00:01Z", "4|u|1970-01-01T00:00:01.003Z"]
    );
    let dead = rows(&decoded.dead_letters.unwrap());
    // A dead letter's raw text is the part that is bad: here the key (none, then `four`).
    assert_eq!(
        dead[0],
        "bids/3|1|id|the key at offset 1 is missing and column `id` is not nullable|∅"
    );
    assert!(
        dead[2].starts_with("bids/3|4|id|the key at offset 4 "),
        "{}",
        dead[2]
    );
    assert!(dead[2].ends_with("|four"), "{}", dead[2]);
    assert_eq!(
        dead[1],
        "bids/3|2|ts|the message at offset 2 has no timestamp and column `ts` is not nullable\
         |{\"user\":\"u\"}"
    );
}

#[test]
fn a_value_format_without_columns_still_checks_the_payloads() {
    let schema = Arc::new(Schema::new(vec![Field::new("off", DataType::Int64, false)]));
    let layout = RecordLayout {
        key_format: None,
        value_format: Format::Json,
        key_columns: vec![],
        value_columns: vec![],
        metadata: vec![(0, MetadataKey::Offset)],
        upsert: false,
        key_prefix: String::new(),
    };
    let mut decoder = decoder((schema, layout), BadRecordPolicy::DeadLetter);
    let messages = [
        message(0, None, Some(b"{}")),
        message(1, None, Some(b"{")),
        message(2, None, Some(br#"{"a":1}"#)),
    ];
    let decoded = decoder.decode(&messages).unwrap();
    assert_eq!(rows(&decoded.data), ["0", "2"]);
    assert_eq!(decoded.dead_letters.unwrap().num_rows(), 1);
}

#[test]
fn schemas_that_do_not_fit_are_refused_naming_the_column() {
    let err = |schema: Vec<Field>, layout: RecordLayout| {
        RecordDecoder::new(Arc::new(Schema::new(schema)), layout, BadRecordPolicy::Fail)
            .unwrap_err()
            .to_string()
    };
    let layout = |value_format, value_columns: Vec<usize>, metadata| RecordLayout {
        key_format: None,
        value_format,
        key_columns: vec![],
        value_columns,
        metadata,
        upsert: false,
        key_prefix: String::new(),
    };
    let v = || Field::new("v", DataType::Utf8, true);
    assert_eq!(
        err(
            vec![v(), Field::new("off", DataType::Int32, true)],
            layout(Format::Json, vec![0], vec![(1, MetadataKey::Offset)])
        ),
        "schema error in kafka source: column `off` holds the Kafka metadata `offset`, which is \
         Int64, but is declared Int32"
    );
    let e = err(
        vec![
            v(),
            Field::new("ts", DataType::Timestamp(TimeUnit::Second, None), true),
        ],
        layout(Format::Json, vec![0], vec![(1, MetadataKey::Timestamp)]),
    );
    assert!(
        e.contains("column `ts`") && e.contains("Timestamp(ms)"),
        "{e}"
    );
    let e = err(
        vec![v(), Field::new("h", DataType::Utf8, true)],
        layout(Format::Json, vec![0], vec![(1, MetadataKey::Headers)]),
    );
    assert!(
        e.contains("column `h`") && e.contains("Map<Utf8, Binary>"),
        "{e}"
    );
    let strict_values = DataType::Map(
        Arc::new(Field::new(
            "entries",
            DataType::Struct(
                vec![
                    Field::new("k", DataType::Utf8, false),
                    Field::new("v", DataType::Binary, false),
                ]
                .into(),
            ),
            false,
        )),
        false,
    );
    let e = err(
        vec![v(), Field::new("h", strict_values, true)],
        layout(Format::Json, vec![0], vec![(1, MetadataKey::Headers)]),
    );
    assert!(e.contains("with nullable values"), "{e}");
    let e = err(
        vec![v(), Field::new("e", DataType::Int32, false)],
        layout(Format::Json, vec![0], vec![(1, MetadataKey::LeaderEpoch)]),
    );
    assert!(e.contains("column `e`") && e.contains("nullable"), "{e}");
    let e = err(
        vec![Field::new("n", DataType::Int64, true)],
        layout(Format::Raw, vec![0], vec![]),
    );
    assert!(
        e.contains("column `n` is the raw value, so it must be Utf8 or Binary"),
        "{e}"
    );
    let e = err(vec![v(), v()], layout(Format::Raw, vec![0, 1], vec![]));
    assert!(e.contains("exactly one value column, found 2"), "{e}");
    let e = err(
        vec![v(), Field::new("w", DataType::Utf8, true)],
        layout(Format::Json, vec![0], vec![]),
    );
    assert!(
        e.contains("column `w` is neither a key, a value nor a metadata column"),
        "{e}"
    );
    let e = err(
        vec![v()],
        layout(Format::Json, vec![0], vec![(0, MetadataKey::Topic)]),
    );
    assert!(
        e.contains("column `v` is listed as a value column and as a metadata column"),
        "{e}"
    );
    let e = err(vec![v()], layout(Format::Json, vec![0, 1], vec![]));
    assert!(e.contains("value column index 1 is out of range"), "{e}");
    let e = err(
        vec![v()],
        RecordLayout {
            key_format: Some(Format::Json),
            ..layout(Format::Json, vec![0], vec![])
        },
    );
    assert!(
        e.contains("a key format is declared but no key columns are"),
        "{e}"
    );
}

#[test]
fn option_values_are_parsed_with_errors_naming_their_path() {
    assert_eq!(Format::parse("raw", "p").unwrap(), Format::Raw);
    assert_eq!(
        Format::parse("avro", "sources[0].options.format")
            .unwrap_err()
            .to_string(),
        "invalid configuration at sources[0].options.format: unknown or unsupported format \
         `avro` (use json, csv, raw or debezium-json)"
    );
    let csv = Format::parse("csv", "p").unwrap();
    assert_eq!(csv, Format::Csv { delimiter: b',' });
    assert_eq!(
        csv.with_field_delimiter("\\t", "d").unwrap(),
        Format::Csv { delimiter: b'\t' }
    );
    let e = csv
        .with_field_delimiter("ab", "o.csv.field-delimiter")
        .unwrap_err();
    assert!(
        e.to_string().starts_with(
            "invalid configuration at o.csv.field-delimiter: invalid field delimiter `ab`"
        ),
        "{e}"
    );
    assert!(csv.with_field_delimiter("\"", "d").is_err());
    assert!(Format::Json.with_field_delimiter(";", "d").is_err());
    assert_eq!(
        MetadataKey::parse("timestamp-type", "m").unwrap(),
        MetadataKey::TimestampType
    );
    assert_eq!(MetadataKey::TimestampType.name(), "timestamp-type");
    assert_eq!(
        MetadataKey::parse("epoch", "columns[2].metadata")
            .unwrap_err()
            .to_string(),
        "invalid configuration at columns[2].metadata: unknown Kafka metadata key `epoch` \
         (known keys: topic, partition, headers, leader-epoch, offset, timestamp, timestamp-type)"
    );
}

#[test]
fn good_records_take_the_fast_path_and_bad_ones_do_not() {
    let fast = |table: (SchemaRef, RecordLayout), messages: &[OwnedMessage]| {
        let decoder = decoder(table, BadRecordPolicy::DeadLetter);
        let rows: Vec<usize> = (0..messages.len()).collect();
        decoder.decode_fast(messages, &rows).unwrap().is_some()
    };
    let good = [
        message(0, Some(br#"{"id":1}"#), Some(br#"{"user":"a","price":1}"#)),
        message(1, None, Some(br#"{"user":"b"}"#)),
    ];
    assert!(fast(table(), &good));
    let bad_key = [message(0, Some(br#"{"id":"x"}"#), Some(br#"{"user":"a"}"#))];
    assert!(!fast(table(), &bad_key));
    let csv = Format::Csv { delimiter: b',' };
    assert!(fast(
        values_only(csv),
        &[
            message(0, None, Some(b"\"a\nb\",1")),
            message(1, None, Some(b"c,"))
        ]
    ));
    for format in [Format::Json, csv] {
        assert!(!fast(values_only(format), &with_bad_records(format)));
    }
}
