//! Messages and batch printing for the format tests.

use arrow::array::RecordBatch;
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

/// Each row of `batch` as its values joined by `|` (null as `∅`).
pub(super) fn rows(batch: &RecordBatch) -> Vec<String> {
    let options = FormatOptions::default().with_null("∅");
    let formatters: Vec<_> = batch
        .columns()
        .iter()
        .map(|c| ArrayFormatter::try_new(c.as_ref(), &options).expect("formattable"))
        .collect();
    (0..batch.num_rows())
        .map(|row| {
            formatters
                .iter()
                .map(|f| f.value(row).to_string())
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect()
}
