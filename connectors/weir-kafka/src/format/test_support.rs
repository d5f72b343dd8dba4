//! Messages and batch printing for the format tests.

use arrow::array::{Array, ArrayRef, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use rdkafka::message::{Header, OwnedHeaders, OwnedMessage, Timestamp};

/// A message of topic `bids`, partition 3, at `offset`, created at `1_000 + offset` ms.
pub(super) fn message(offset: i64, key: Option<&[u8]>, value: Option<&[u8]>) -> OwnedMessage {
    OwnedMessage::new(
        value.map(<[u8]>::to_vec),
        key.map(<[u8]>::to_vec),
        "bids".to_owned(),
        Timestamp::CreateTime(1_000 + offset),
        3,
        offset,
        None,
    )
}

/// Headers of `(name, value)` pairs.
pub(super) fn headers(pairs: &[(&str, Option<&[u8]>)]) -> OwnedHeaders {
    pairs.iter().fold(OwnedHeaders::new(), |h, (key, value)| {
        h.insert(Header { key, value: *value })
    })
}

/// Each row of `batch` as its values joined by `|` (null as `∅`); timestamps with a time zone
/// are shown in UTC with a `Z` (arrow cannot format named zones without chrono-tz).
pub(super) fn rows(batch: &RecordBatch) -> Vec<String> {
    let options = FormatOptions::default().with_null("∅");
    let columns: Vec<(ArrayRef, &str)> = batch
        .columns()
        .iter()
        .map(|c| match c.data_type() {
            DataType::Timestamp(unit, Some(_)) => (
                cast(c, &DataType::Timestamp(*unit, None)).expect("castable"),
                "Z",
            ),
            _ => (c.clone(), ""),
        })
        .collect();
    let formatters: Vec<_> = columns
        .iter()
        .map(|(c, suffix)| {
            (
                ArrayFormatter::try_new(c.as_ref(), &options).expect("formattable"),
                *suffix,
                c.clone(),
            )
        })
        .collect();
    (0..batch.num_rows())
        .map(|row| {
            formatters
                .iter()
                .map(|(f, suffix, c)| {
                    let suffix = if c.is_valid(row) { *suffix } else { "" };
                    format!("{}{suffix}", f.value(row))
                })
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect()
}
