//! Kafka message metadata as table columns: the keys Flink's Kafka connector offers, their Arrow
//! types, and building their columns from messages (source) or reading them for producing (sink).

use arrow::array::{
    Array, ArrayBuilder, ArrayRef, BinaryArray, BinaryBuilder, Int32Array, Int64Array, MapArray,
    StringArray, StringBuilder, StructArray, TimestampMillisecondArray, new_null_array,
};
use arrow::buffer::OffsetBuffer;
use arrow::datatypes::{DataType, Field, Fields, TimeUnit};
use rdkafka::message::{Headers, Message, Timestamp};
use std::sync::Arc;
use weir_api::{Error, Result};

/// The metadata keys of Flink's Kafka connector, as a column's `METADATA FROM` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MetadataKey {
    /// The topic the message was read from (Utf8, not null).
    Topic,
    /// The partition of the message (Int32).
    Partition,
    /// The message headers (Map<Utf8, Binary>); a message without headers gives an empty map.
    Headers,
    /// The leader epoch of the message (Int32, nullable); rdkafka does not expose it, so it is
    /// always null.
    LeaderEpoch,
    /// The offset of the message in its partition (Int64).
    Offset,
    /// The message timestamp (Timestamp(ms, UTC)); null when the message has none.
    Timestamp,
    /// The kind of timestamp (Utf8: `NoTimestampType`, `CreateTime` or `LogAppendTime`).
    TimestampType,
}

/// Every key with its name, in Flink's documentation order.
const KEYS: [(&str, MetadataKey); 7] = [
    ("topic", MetadataKey::Topic),
    ("partition", MetadataKey::Partition),
    ("headers", MetadataKey::Headers),
    ("leader-epoch", MetadataKey::LeaderEpoch),
    ("offset", MetadataKey::Offset),
    ("timestamp", MetadataKey::Timestamp),
    ("timestamp-type", MetadataKey::TimestampType),
];

impl MetadataKey {
    /// Parses a metadata key name (`offset`, `timestamp-type`, ...).
    ///
    /// # Errors
    /// [`Error::Config`] at `path` listing the known keys.
    pub(crate) fn parse(name: &str, path: &str) -> Result<Self> {
        KEYS.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, key)| *key)
            .ok_or_else(|| {
                let known: Vec<&str> = KEYS.iter().map(|(n, _)| *n).collect();
                Error::config(
                    path,
                    format!(
                        "unknown Kafka metadata key `{name}` (known keys: {})",
                        known.join(", ")
                    ),
                )
            })
    }

    /// The key's name as Flink spells it.
    pub(crate) fn name(self) -> &'static str {
        KEYS.iter()
            .find(|(_, key)| *key == self)
            .map_or("", |(n, _)| *n)
    }

    /// The Arrow type a column of this key gets when the schema does not declare one.
    pub(crate) fn data_type(self) -> DataType {
        match self {
            MetadataKey::Topic | MetadataKey::TimestampType => DataType::Utf8,
            MetadataKey::Partition | MetadataKey::LeaderEpoch => DataType::Int32,
            MetadataKey::Offset => DataType::Int64,
            MetadataKey::Timestamp => {
                DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
            }
            MetadataKey::Headers => DataType::Map(
                Arc::new(Field::new(
                    "entries",
                    DataType::Struct(Fields::from(vec![
                        Field::new("keys", DataType::Utf8, false),
                        Field::new("values", DataType::Binary, true),
                    ])),
                    false,
                )),
                false,
            ),
        }
    }

    /// Whether a column of this key can hold nulls when the schema does not say (the tests
    /// build their schemas with it).
    #[cfg(test)]
    pub(crate) fn nullable(self) -> bool {
        matches!(self, MetadataKey::LeaderEpoch | MetadataKey::Timestamp)
    }

    /// Whether a sink can write this key (`headers` and `timestamp`; the rest Kafka assigns).
    pub(crate) fn writable(self) -> bool {
        matches!(self, MetadataKey::Headers | MetadataKey::Timestamp)
    }

    /// Checks that a declared column can hold this key: the key's type (a timestamp column may
    /// also be Timestamp(ms) without a time zone; a headers column any Map<Utf8, Binary> whose
    /// values are nullable, as a header may have no value), and a nullable `leader-epoch`. `context` names the connector in errors.
    ///
    /// # Errors
    /// [`Error::Schema`] naming the column, its type and the type the key needs.
    pub(crate) fn check_field(self, field: &Field, context: &str) -> Result<()> {
        let fits = match (self, field.data_type()) {
            (MetadataKey::Timestamp, DataType::Timestamp(TimeUnit::Millisecond, tz)) => {
                tz.as_deref().is_none_or(|tz| tz == "UTC")
            }
            (MetadataKey::Headers, DataType::Map(entries, _)) => map_entry_fields(entries)
                .is_some_and(|(k, v)| {
                    *k.data_type() == DataType::Utf8
                        && *v.data_type() == DataType::Binary
                        && v.is_nullable()
                }),
            (key, declared) => key.data_type() == *declared,
        };
        if !fits {
            let wanted = match self {
                MetadataKey::Timestamp => "Timestamp(ms, \"UTC\") or Timestamp(ms)".to_owned(),
                MetadataKey::Headers => "Map<Utf8, Binary> with nullable values".to_owned(),
                key => key.data_type().to_string(),
            };
            return Err(Error::schema(
                context,
                format!(
                    "column `{}` holds the Kafka metadata `{}`, which is {wanted}, but is \
                     declared {}",
                    field.name(),
                    self.name(),
                    field.data_type()
                ),
            ));
        }
        if self == MetadataKey::LeaderEpoch && !field.is_nullable() {
            return Err(Error::schema(
                context,
                format!(
                    "column `{}` holds the Kafka metadata `leader-epoch`, which is unknown to \
                     the Kafka client and so always null: declare it nullable",
                    field.name()
                ),
            ));
        }
        Ok(())
    }

    /// Builds the column `field` of this key from `messages[rows]`.
    ///
    /// # Errors
    /// [`Error::Arrow`] when the headers map cannot be assembled in the declared type.
    pub(crate) fn column<M: Message>(
        self,
        field: &Field,
        messages: &[M],
        rows: &[usize],
    ) -> Result<ArrayRef> {
        let each = || rows.iter().map(|&i| &messages[i]);
        Ok(match self {
            MetadataKey::Topic => {
                Arc::new(StringArray::from_iter_values(each().map(|m| m.topic())))
            }
            MetadataKey::Partition => {
                Arc::new(Int32Array::from_iter_values(each().map(|m| m.partition())))
            }
            MetadataKey::Offset => {
                Arc::new(Int64Array::from_iter_values(each().map(|m| m.offset())))
            }
            MetadataKey::LeaderEpoch => new_null_array(field.data_type(), rows.len()),
            MetadataKey::Timestamp => {
                let tz = match field.data_type() {
                    DataType::Timestamp(_, tz) => tz.clone(),
                    _ => None,
                };
                Arc::new(
                    TimestampMillisecondArray::from_iter(each().map(|m| m.timestamp().to_millis()))
                        .with_timezone_opt(tz),
                )
            }
            MetadataKey::TimestampType => Arc::new(StringArray::from_iter_values(each().map(
                |m| match m.timestamp() {
                    Timestamp::NotAvailable => "NoTimestampType",
                    Timestamp::CreateTime(_) => "CreateTime",
                    Timestamp::LogAppendTime(_) => "LogAppendTime",
                },
            ))),
            MetadataKey::Headers => headers_column(field, each())?,
        })
    }

    /// Why `message` cannot fill a column `field` of this key, if it cannot (said of the message:
    /// `has no timestamp ...`): only a message without a timestamp in a non-nullable column.
    pub(crate) fn problem<M: Message>(self, field: &Field, message: &M) -> Option<String> {
        (self == MetadataKey::Timestamp
            && !field.is_nullable()
            && message.timestamp().to_millis().is_none())
        .then(|| {
            format!(
                "has no timestamp and column `{}` is not nullable",
                field.name()
            )
        })
    }
}

/// The key and value fields of a map's entries field.
fn map_entry_fields(entries: &Field) -> Option<(&Field, &Field)> {
    match entries.data_type() {
        DataType::Struct(fields) if fields.len() == 2 => Some((&fields[0], &fields[1])),
        _ => None,
    }
}

/// Builds a headers map column in the declared map type from messages.
fn headers_column<'a, M: Message + 'a>(
    field: &Field,
    messages: impl Iterator<Item = &'a M>,
) -> Result<ArrayRef> {
    let DataType::Map(entries_field, sorted) = field.data_type() else {
        return Err(Error::Internal(format!(
            "headers column `{}` is not a map",
            field.name()
        )));
    };
    let DataType::Struct(entry_fields) = entries_field.data_type() else {
        return Err(Error::Internal(format!(
            "headers column `{}` has no struct entries",
            field.name()
        )));
    };
    let mut names = StringBuilder::new();
    let mut values = BinaryBuilder::new();
    let mut offsets = vec![0i32];
    for message in messages {
        if let Some(headers) = message.headers() {
            for header in headers.iter() {
                names.append_value(header.key);
                values.append_option(header.value);
            }
        }
        let len = i32::try_from(names.len())
            .map_err(|_| Error::Internal("more than 2^31 Kafka headers in one batch".to_owned()))?;
        offsets.push(len);
    }
    let context = || format!("building the headers column `{}`", field.name());
    let entries = StructArray::try_new(
        entry_fields.clone(),
        vec![Arc::new(names.finish()), Arc::new(values.finish())],
        None,
    )
    .map_err(|e| Error::arrow(context(), e))?;
    let map = MapArray::try_new(
        entries_field.clone(),
        OffsetBuffer::new(offsets.into()),
        entries,
        None,
        *sorted,
    )
    .map_err(|e| Error::arrow(context(), e))?;
    Ok(Arc::new(map))
}

/// Reads a `timestamp` column of a sink's batch as milliseconds since the epoch.
///
/// # Errors
/// [`Error::Internal`] when the column is not Timestamp(ms) (the encoder checked it).
pub(crate) fn timestamps(column: &dyn Array) -> Result<Vec<Option<i64>>> {
    column
        .as_any()
        .downcast_ref::<TimestampMillisecondArray>()
        .map(|ts| ts.iter().collect())
        .ok_or_else(|| Error::Internal("the timestamp column is not Timestamp(ms)".to_owned()))
}

/// Reads a `headers` column of a sink's batch: per row, the header names and values; a null map
/// gives no headers.
///
/// # Errors
/// [`Error::Internal`] when the column is not a Map<Utf8, Binary> (the encoder checked it).
pub(crate) fn headers(column: &dyn Array) -> Result<Vec<super::RowHeaders>> {
    let wrong = || Error::Internal("the headers column is not a Map<Utf8, Binary>".to_owned());
    let map = column
        .as_any()
        .downcast_ref::<MapArray>()
        .ok_or_else(wrong)?;
    let names = map
        .keys()
        .as_any()
        .downcast_ref::<StringArray>()
        .ok_or_else(wrong)?;
    let values = map
        .values()
        .as_any()
        .downcast_ref::<BinaryArray>()
        .ok_or_else(wrong)?;
    let offsets = map.value_offsets();
    Ok((0..map.len())
        .map(|row| {
            if map.is_null(row) {
                return Vec::new();
            }
            (offsets[row] as usize..offsets[row + 1] as usize)
                .map(|e| {
                    (
                        names.value(e).to_owned(),
                        values.is_valid(e).then(|| values.value(e).to_vec()),
                    )
                })
                .collect()
        })
        .collect())
}
