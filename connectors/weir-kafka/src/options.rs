//! The options of Kafka sources and sinks: Flink's Kafka SQL connector names, the same in SQL
//! `WITH` clauses and in job specs (`'properties.bootstrap.servers'`, `'scan.startup.mode'`,
//! `'sink.delivery-guarantee'`, ...), plus `metadata`, the columns filled from Kafka metadata.

use crate::format::{Format, MetadataKey, RecordLayout};
use arrow::datatypes::SchemaRef;
use std::collections::BTreeMap;
use std::time::Duration;
use weir_api::secrets::RedactedOptions;
use weir_api::{DurationMs, Error, Result};

/// Options every Kafka node takes.
const COMMON: &[&str] = &[
    "topic",
    "format",
    "value.format",
    "key.format",
    "key.fields",
    "key.fields-prefix",
    "value.fields-include",
    "csv.field-delimiter",
    "metadata",
];

/// Options only a source takes.
const SOURCE: &[&str] = &[
    "scan.startup.mode",
    "scan.startup.timestamp-millis",
    "scan.startup.specific-offsets",
    "scan.bounded.mode",
    "scan.bounded.timestamp-millis",
    "scan.bounded.specific-offsets",
    "scan.topic-partition-discovery.interval",
    "scan.batch-size",
];

/// Options only a sink takes.
const SINK: &[&str] = &[
    "sink.delivery-guarantee",
    "sink.transactional-id-prefix",
    "sink.partitioner",
    "sink.epoch-topic",
];

/// librdkafka properties Weir sets itself; a `properties.` value for them is refused.
const RESERVED_PROPERTIES: &[&str] = &[
    "enable.partition.eof",
    "transactional.id",
    "enable.idempotence",
    "statistics.interval.ms",
];

/// Partition discovery interval when `scan.topic-partition-discovery.interval` is not set
/// (Flink's default).
pub(crate) const DEFAULT_DISCOVERY_INTERVAL: Duration = Duration::from_secs(300);

/// Records per batch when `scan.batch-size` is not set.
pub(crate) const DEFAULT_BATCH_SIZE: usize = 8192;

/// The flat option map of a node, its values as strings, with the JSON path for errors.
pub(crate) struct RawOptions {
    values: BTreeMap<String, String>,
    /// `metadata`: column -> metadata key.
    metadata: BTreeMap<String, String>,
    path: String,
}

impl RawOptions {
    /// Reads `options` (a JSON object of scalars, plus the `metadata` object), refusing keys
    /// that are neither in `known` nor `properties.*`.
    pub(crate) fn parse(
        options: &serde_json::Value,
        path: &str,
        known: &[&[&str]],
    ) -> Result<Self> {
        let object = options.as_object().ok_or_else(|| {
            Error::config(path, "the kafka connector's options must be an object")
        })?;
        let mut values = BTreeMap::new();
        let mut metadata = BTreeMap::new();
        for (key, value) in object {
            let at = format!("{path}.'{key}'");
            if key == "metadata" {
                let columns = value.as_object().ok_or_else(|| {
                    Error::config(
                        &at,
                        "`metadata` maps columns to Kafka metadata keys: {\"ts\": \"timestamp\"}",
                    )
                })?;
                for (column, key) in columns {
                    let key = key.as_str().ok_or_else(|| {
                        Error::config(
                            format!("{at}.{column}"),
                            "a metadata key is a string such as \"timestamp\"",
                        )
                    })?;
                    metadata.insert(column.clone(), key.to_owned());
                }
                continue;
            }
            let known_key = key.starts_with("properties.")
                || known.iter().any(|list| list.contains(&key.as_str()));
            if !known_key {
                let mut all: Vec<&str> = known.iter().flat_map(|l| l.iter().copied()).collect();
                all.push("properties.*");
                return Err(Error::config(
                    at,
                    format!("unknown option; known: {}", all.join(", ")),
                ));
            }
            if let Some(property) = key.strip_prefix("properties.")
                && RESERVED_PROPERTIES.contains(&property)
            {
                return Err(Error::config(
                    at,
                    "Weir sets this librdkafka property itself (see docs/connectors/kafka.md)",
                ));
            }
            let text = match value {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Number(n) => n.to_string(),
                serde_json::Value::Bool(b) => b.to_string(),
                _ => {
                    return Err(Error::config(at, "expected a string, number or boolean"));
                }
            };
            values.insert(key.clone(), text);
        }
        Ok(RawOptions {
            values,
            metadata,
            path: path.to_owned(),
        })
    }

    /// The JSON path of option `key`.
    pub(crate) fn at(&self, key: &str) -> String {
        format!("{}.'{key}'", self.path)
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }

    fn required(&self, key: &str) -> Result<&str> {
        self.get(key)
            .filter(|v| !v.trim().is_empty())
            .ok_or_else(|| Error::config(self.at(key), "this option is required"))
    }

    fn number(&self, key: &str) -> Result<Option<i64>> {
        self.get(key)
            .map(|v| {
                v.trim().parse::<i64>().map_err(|_| {
                    Error::config(self.at(key), format!("expected a whole number, not '{v}'"))
                })
            })
            .transpose()
    }

    /// Every `properties.*` option, without the prefix: passed to librdkafka as they are.
    pub(crate) fn properties(&self) -> BTreeMap<String, String> {
        self.values
            .iter()
            .filter_map(|(k, v)| {
                k.strip_prefix("properties.")
                    .map(|p| (p.to_owned(), v.clone()))
            })
            .collect()
    }

    /// `properties.bootstrap.servers`.
    pub(crate) fn bootstrap_servers(&self) -> Result<String> {
        self.required("properties.bootstrap.servers")
            .map(str::to_owned)
    }

    /// The record layout: formats, key fields and metadata columns over `schema`; `upsert` for
    /// an `upsert-kafka` node, whose key holds the primary key.
    pub(crate) fn layout(
        &self,
        schema: &SchemaRef,
        writing: bool,
        upsert: bool,
    ) -> Result<RecordLayout> {
        let value_format_key = if self.get("value.format").is_some() {
            "value.format"
        } else {
            "format"
        };
        let with_delimiter = |format: Format| match self.get("csv.field-delimiter") {
            Some(d) if matches!(format, Format::Csv { .. }) => {
                format.with_field_delimiter(d, &self.at("csv.field-delimiter"))
            }
            _ => Ok(format),
        };
        let value_format = with_delimiter(Format::parse(
            self.required(value_format_key)?,
            &self.at(value_format_key),
        )?)?;
        let mut key_format = self
            .get("key.format")
            .map(|f| Format::parse(f, &self.at("key.format")))
            .transpose()?
            .map(with_delimiter)
            .transpose()?;
        let key_fields: Vec<String> = self
            .get("key.fields")
            .map(|f| {
                f.split(';')
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        if !key_fields.is_empty() && key_format.is_none() {
            return Err(Error::config(
                self.at("key.fields"),
                "'key.fields' needs a 'key.format'",
            ));
        }
        if upsert && (key_format.is_none() || key_fields.is_empty()) {
            return Err(Error::config(
                self.at("key.fields"),
                "an upsert-kafka table needs its primary key in the message key: 'key.format' \
                 and 'key.fields' (from PRIMARY KEY (...) NOT ENFORCED in SQL)",
            ));
        }
        if key_format.is_some() && key_fields.is_empty() {
            return Err(Error::config(
                self.at("key.format"),
                "'key.format' needs 'key.fields': the columns the key holds, separated by ';'",
            ));
        }
        let include_all = match self.get("value.fields-include") {
            None => true,
            Some(v) if v.eq_ignore_ascii_case("ALL") => true,
            Some(v) if v.eq_ignore_ascii_case("EXCEPT_KEY") => false,
            Some(v) => {
                return Err(Error::config(
                    self.at("value.fields-include"),
                    format!("expected ALL or EXCEPT_KEY, not '{v}'"),
                ));
            }
        };
        let mut metadata = Vec::new();
        for (column, key) in &self.metadata {
            let index = schema.index_of(column).map_err(|_| {
                Error::config(
                    format!("{}.metadata.{column}", self.path),
                    "no such column in the schema",
                )
            })?;
            let key = MetadataKey::parse(key, &format!("{}.metadata.{column}", self.path))?;
            metadata.push((index, key));
        }
        let mut key_columns = Vec::new();
        for name in &key_fields {
            let index = schema.index_of(name).map_err(|_| {
                Error::config(
                    self.at("key.fields"),
                    format!("no column `{name}` in the schema"),
                )
            })?;
            key_columns.push(index);
        }
        let key_prefix = self.get("key.fields-prefix").unwrap_or_default().to_owned();
        if !key_prefix.is_empty() {
            if include_all {
                return Err(Error::config(
                    self.at("key.fields-prefix"),
                    "'key.fields-prefix' needs 'value.fields-include' = 'EXCEPT_KEY'",
                ));
            }
            if let Some(name) = key_fields.iter().find(|k| !k.starts_with(&key_prefix)) {
                return Err(Error::config(
                    self.at("key.fields-prefix"),
                    format!("key column `{name}` does not start with the prefix `{key_prefix}`"),
                ));
            }
        }
        // With ALL the value holds every physical column, key columns included: a reader takes
        // them from the value (a positional format such as CSV needs every field in place), a
        // writer puts them in both the key and the value. An upsert reader takes them from the
        // key, since a tombstone has no value.
        if include_all && !writing && !upsert {
            key_columns.clear();
            key_format = None;
        }
        let value_columns: Vec<usize> = (0..schema.fields().len())
            .filter(|i| !metadata.iter().any(|(m, _)| m == i))
            .filter(|i| include_all || !key_columns.contains(i))
            .collect();
        Ok(RecordLayout {
            key_format,
            value_format,
            key_columns,
            value_columns,
            metadata,
            upsert,
            key_prefix,
        })
    }
}

/// Where reading a partition starts (`scan.startup.mode`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StartFrom {
    /// The oldest offset the broker has.
    Earliest,
    /// The end of the partition when the job starts.
    Latest,
    /// The consumer group's committed offset; without one, `auto.offset.reset` decides
    /// (`earliest` or `latest`), and without that the job fails.
    GroupOffsets {
        /// `properties.auto.offset.reset` when set.
        reset: Option<StartReset>,
    },
    /// The first offset whose timestamp is at or after this (ms since the epoch).
    Timestamp(i64),
    /// Offsets per partition; partitions not listed start at the earliest offset.
    Specific(BTreeMap<i32, i64>),
}

/// `properties.auto.offset.reset`, for group offsets that do not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StartReset {
    /// The oldest offset.
    Earliest,
    /// The end of the partition.
    Latest,
}

/// Where a bounded source stops (`scan.bounded.mode`); the end offsets are resolved when the
/// job starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StopAt {
    /// Never: the source is unbounded (the default).
    Unbounded,
    /// The offsets that were the end of each partition when the job started.
    Latest,
    /// The first offset whose timestamp is after this (ms since the epoch).
    Timestamp(i64),
    /// Offsets per partition (exclusive); partitions not listed are read to their end at start.
    Specific(BTreeMap<i32, i64>),
}

/// The options of a Kafka source.
pub(crate) struct SourceOptions {
    pub(crate) topics: Vec<String>,
    pub(crate) bootstrap_servers: String,
    pub(crate) group_id: Option<String>,
    pub(crate) properties: BTreeMap<String, String>,
    pub(crate) start: StartFrom,
    pub(crate) stop: StopAt,
    /// `None`: no partition discovery.
    pub(crate) discovery: Option<Duration>,
    pub(crate) batch_size: usize,
    /// Whether the consumer reads only committed records (`isolation.level`, read_committed
    /// unless set otherwise).
    pub(crate) read_committed: bool,
}

impl SourceOptions {
    /// Reads a source's options.
    pub(crate) fn parse(raw: &RawOptions) -> Result<Self> {
        let topics: Vec<String> = raw
            .required("topic")?
            .split(';')
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty())
            .collect();
        let properties = raw.properties();
        let reset = match properties.get("auto.offset.reset").map(String::as_str) {
            None => None,
            Some("earliest" | "smallest" | "beginning") => Some(StartReset::Earliest),
            Some("latest" | "largest" | "end") => Some(StartReset::Latest),
            Some(other) => {
                return Err(Error::config(
                    raw.at("properties.auto.offset.reset"),
                    format!("expected earliest or latest, not '{other}'"),
                ));
            }
        };
        let start = match raw.get("scan.startup.mode").unwrap_or("group-offsets") {
            "earliest-offset" => StartFrom::Earliest,
            "latest-offset" => StartFrom::Latest,
            "group-offsets" => StartFrom::GroupOffsets { reset },
            "timestamp" => StartFrom::Timestamp(
                raw.number("scan.startup.timestamp-millis")?
                    .ok_or_else(|| {
                        Error::config(
                            raw.at("scan.startup.timestamp-millis"),
                            "'scan.startup.mode' = 'timestamp' needs this option",
                        )
                    })?,
            ),
            "specific-offsets" => {
                StartFrom::Specific(specific_offsets(raw, "scan.startup.specific-offsets")?)
            }
            other => {
                return Err(Error::config(
                    raw.at("scan.startup.mode"),
                    format!(
                        "unknown mode '{other}'; known: earliest-offset, latest-offset, \
                         group-offsets, timestamp, specific-offsets"
                    ),
                ));
            }
        };
        let stop = match raw.get("scan.bounded.mode").unwrap_or("unbounded") {
            "unbounded" => StopAt::Unbounded,
            "latest-offset" => StopAt::Latest,
            "timestamp" => StopAt::Timestamp(
                raw.number("scan.bounded.timestamp-millis")?
                    .ok_or_else(|| {
                        Error::config(
                            raw.at("scan.bounded.timestamp-millis"),
                            "'scan.bounded.mode' = 'timestamp' needs this option",
                        )
                    })?,
            ),
            "specific-offsets" => {
                StopAt::Specific(specific_offsets(raw, "scan.bounded.specific-offsets")?)
            }
            other => {
                return Err(Error::config(
                    raw.at("scan.bounded.mode"),
                    format!(
                        "unknown mode '{other}'; known: unbounded, latest-offset, timestamp, \
                         specific-offsets"
                    ),
                ));
            }
        };
        let discovery = match raw.get("scan.topic-partition-discovery.interval") {
            None => Some(DEFAULT_DISCOVERY_INTERVAL),
            Some(text) => {
                let ms = DurationMs::parse(text).map_err(|m| {
                    Error::config(raw.at("scan.topic-partition-discovery.interval"), m)
                })?;
                (ms.0 > 0).then(|| Duration::from_millis(ms.0))
            }
        };
        let batch_size = match raw.number("scan.batch-size")? {
            None => DEFAULT_BATCH_SIZE,
            Some(n) if n > 0 => usize::try_from(n).unwrap_or(DEFAULT_BATCH_SIZE),
            Some(n) => {
                return Err(Error::config(
                    raw.at("scan.batch-size"),
                    format!("must be at least 1, not {n}"),
                ));
            }
        };
        let read_committed = properties
            .get("isolation.level")
            .is_none_or(|l| l != "read_uncommitted");
        if matches!(start, StartFrom::GroupOffsets { .. }) && !properties.contains_key("group.id") {
            return Err(Error::config(
                raw.at("properties.group.id"),
                "'scan.startup.mode' = 'group-offsets' (the default) needs a consumer group; \
                 set 'properties.group.id' or choose another 'scan.startup.mode'",
            ));
        }
        Ok(SourceOptions {
            topics,
            bootstrap_servers: raw.bootstrap_servers()?,
            group_id: properties.get("group.id").cloned(),
            properties,
            start,
            stop,
            discovery,
            batch_size,
            read_committed,
        })
    }

    /// Whether the source ends by itself.
    pub(crate) fn bounded(&self) -> bool {
        self.stop != StopAt::Unbounded
    }
}

/// Flink's `partition:0,offset:42;partition:1,offset:300`.
fn specific_offsets(raw: &RawOptions, key: &str) -> Result<BTreeMap<i32, i64>> {
    let text = raw.required(key)?;
    let mut out = BTreeMap::new();
    for entry in text.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let bad = || {
            Error::config(
                raw.at(key),
                format!("expected 'partition:<n>,offset:<n>;...', found '{entry}'"),
            )
        };
        let (p, o) = entry.split_once(',').ok_or_else(bad)?;
        let partition = p
            .trim()
            .strip_prefix("partition:")
            .and_then(|n| n.trim().parse::<i32>().ok())
            .ok_or_else(bad)?;
        let offset = o
            .trim()
            .strip_prefix("offset:")
            .and_then(|n| n.trim().parse::<i64>().ok())
            .filter(|n| *n >= 0)
            .ok_or_else(bad)?;
        out.insert(partition, offset);
    }
    Ok(out)
}

/// `sink.delivery-guarantee`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// One Kafka transaction per checkpoint epoch, committed after the epoch is durable.
    ExactlyOnce,
    /// Flushed at every checkpoint barrier; a restore may write records again.
    AtLeastOnce,
    /// Nothing waited for.
    None,
}

/// `sink.partitioner`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Partitioner {
    /// librdkafka's: by the key's hash when there is a key, otherwise spread.
    Default,
    /// Subtask `i` writes to partition `i mod partitions` (Flink's `fixed`).
    Fixed,
    /// Records spread over all partitions in turn.
    RoundRobin,
}

/// The options of a Kafka sink.
pub(crate) struct SinkOptions {
    pub(crate) topic: String,
    pub(crate) bootstrap_servers: String,
    pub(crate) properties: BTreeMap<String, String>,
    pub(crate) delivery: Delivery,
    pub(crate) transactional_id_prefix: Option<String>,
    pub(crate) partitioner: Partitioner,
    /// The epoch topic of an exactly-once sink (empty for other guarantees): one sink's alone.
    pub(crate) epoch_topic: String,
}

/// The epoch topic of an exactly-once sink is `{sink.transactional-id-prefix}` followed by
/// this, unless `sink.epoch-topic` names it.
pub(crate) const EPOCH_TOPIC_SUFFIX: &str = ".weir-epochs";

/// `name` when it is a legal Kafka topic name (1 to 249 of `[a-zA-Z0-9._-]`).
fn legal_topic(name: &str, path: &str) -> Result<String> {
    let legal = !name.is_empty()
        && name.len() <= 249
        && name != "."
        && name != ".."
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if legal {
        Ok(name.to_owned())
    } else {
        Err(Error::config(
            path,
            format!("`{name}` is not a legal topic name (1 to 249 of a-z A-Z 0-9 . _ -)"),
        ))
    }
}

impl SinkOptions {
    /// Reads a sink's options.
    pub(crate) fn parse(raw: &RawOptions) -> Result<Self> {
        let topic = raw.required("topic")?.trim().to_owned();
        if topic.contains(';') {
            return Err(Error::config(raw.at("topic"), "a sink writes to one topic"));
        }
        let delivery = match raw
            .get("sink.delivery-guarantee")
            .unwrap_or("at-least-once")
        {
            "exactly-once" => Delivery::ExactlyOnce,
            "at-least-once" => Delivery::AtLeastOnce,
            "none" => Delivery::None,
            other => {
                return Err(Error::config(
                    raw.at("sink.delivery-guarantee"),
                    format!(
                        "unknown guarantee '{other}'; known: exactly-once, at-least-once, none"
                    ),
                ));
            }
        };
        let transactional_id_prefix = raw
            .get("sink.transactional-id-prefix")
            .map(|p| p.trim().to_owned())
            .filter(|p| !p.is_empty());
        if delivery == Delivery::ExactlyOnce && transactional_id_prefix.is_none() {
            return Err(Error::config(
                raw.at("sink.transactional-id-prefix"),
                "'sink.delivery-guarantee' = 'exactly-once' needs a transactional id prefix, \
                 unique to this sink among everything that writes to the cluster",
            ));
        }
        let partitioner = match raw.get("sink.partitioner").unwrap_or("default") {
            "default" => Partitioner::Default,
            "fixed" => Partitioner::Fixed,
            "round-robin" => Partitioner::RoundRobin,
            other => {
                return Err(Error::config(
                    raw.at("sink.partitioner"),
                    format!("unknown partitioner '{other}'; known: default, fixed, round-robin"),
                ));
            }
        };
        Ok(SinkOptions {
            topic,
            bootstrap_servers: raw.bootstrap_servers()?,
            properties: raw.properties(),
            delivery,
            partitioner,
            epoch_topic: match (raw.get("sink.epoch-topic"), &transactional_id_prefix) {
                (Some(t), _) => legal_topic(t.trim(), &raw.at("sink.epoch-topic"))?,
                (None, Some(prefix)) => legal_topic(
                    &format!("{prefix}{EPOCH_TOPIC_SUFFIX}"),
                    &raw.at("sink.transactional-id-prefix"),
                )
                .map_err(|_| {
                    Error::config(
                        raw.at("sink.epoch-topic"),
                        format!(
                            "the default epoch topic `{prefix}{EPOCH_TOPIC_SUFFIX}` is not a \
                             legal topic name; set 'sink.epoch-topic'"
                        ),
                    )
                })?,
                (None, None) => String::new(),
            },
            transactional_id_prefix,
        })
    }
}

/// The option lists of a source, for [`RawOptions::parse`].
pub(crate) const SOURCE_OPTIONS: &[&[&str]] = &[COMMON, SOURCE];
/// The option lists of a sink, for [`RawOptions::parse`].
pub(crate) const SINK_OPTIONS: &[&[&str]] = &[COMMON, SINK];

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn raw(v: serde_json::Value, known: &[&[&str]]) -> Result<RawOptions> {
        RawOptions::parse(&v, "sources[0].options", known)
    }

    #[test]
    fn flink_names_parse() {
        let r = raw(
            serde_json::json!({
                "topic": "a;b",
                "properties.bootstrap.servers": "127.0.0.1:9092",
                "properties.group.id": "g",
                "format": "json",
                "scan.startup.mode": "specific-offsets",
                "scan.startup.specific-offsets": "partition:0,offset:42;partition:1,offset:300",
                "scan.bounded.mode": "latest-offset",
                "scan.topic-partition-discovery.interval": "10s",
            }),
            SOURCE_OPTIONS,
        )
        .unwrap();
        let o = SourceOptions::parse(&r).unwrap();
        assert_eq!(o.topics, ["a", "b"]);
        assert_eq!(
            o.start,
            StartFrom::Specific(BTreeMap::from([(0, 42), (1, 300)]))
        );
        assert_eq!(o.stop, StopAt::Latest);
        assert!(o.bounded());
        assert_eq!(o.discovery, Some(Duration::from_secs(10)));
        assert!(o.read_committed);
        assert_eq!(o.group_id.as_deref(), Some("g"));
    }

    #[test]
    fn errors_name_the_option() {
        let err = raw(
            serde_json::json!({"topic": "a", "scan.startup.mod": "x"}),
            SOURCE_OPTIONS,
        )
        .unwrap_err();
        assert!(err.to_string().contains("'scan.startup.mod'"), "{err}");
        assert!(err.to_string().contains("unknown option"), "{err}");

        let r = raw(
            serde_json::json!({"topic": "a", "properties.bootstrap.servers": "b:1",
                "scan.startup.mode": "earliest"}),
            SOURCE_OPTIONS,
        )
        .unwrap();
        let err = SourceOptions::parse(&r).unwrap_err();
        assert!(err.to_string().contains("'scan.startup.mode'"), "{err}");
        assert!(err.to_string().contains("earliest-offset"), "{err}");

        let r = raw(
            serde_json::json!({"topic": "a", "properties.bootstrap.servers": "b:1"}),
            SOURCE_OPTIONS,
        )
        .unwrap();
        let err = SourceOptions::parse(&r).unwrap_err();
        assert!(err.to_string().contains("properties.group.id"), "{err}");

        let err = raw(
            serde_json::json!({"topic": "a", "properties.transactional.id": "x"}),
            SINK_OPTIONS,
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("sets this librdkafka property itself"),
            "{err}"
        );

        let r = raw(
            serde_json::json!({"topic": "a", "properties.bootstrap.servers": "b:1",
                "sink.delivery-guarantee": "exactly-once"}),
            SINK_OPTIONS,
        )
        .unwrap();
        let err = SinkOptions::parse(&r).unwrap_err();
        assert!(
            err.to_string().contains("sink.transactional-id-prefix"),
            "{err}"
        );
    }
}

// `Debug` of the option structs shows secret properties (`sasl.password`, JAAS configs)
// redacted: they may end up in a log line or a panic message.
impl std::fmt::Debug for RawOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawOptions")
            .field("values", &RedactedOptions(&self.values))
            .field("metadata", &self.metadata)
            .field("path", &self.path)
            .finish()
    }
}

impl std::fmt::Debug for SourceOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceOptions")
            .field("topics", &self.topics)
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("group_id", &self.group_id)
            .field("properties", &RedactedOptions(&self.properties))
            .field("start", &self.start)
            .field("stop", &self.stop)
            .field("discovery", &self.discovery)
            .field("batch_size", &self.batch_size)
            .field("read_committed", &self.read_committed)
            .finish()
    }
}

impl std::fmt::Debug for SinkOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SinkOptions")
            .field("topic", &self.topic)
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("properties", &RedactedOptions(&self.properties))
            .field("delivery", &self.delivery)
            .field("transactional_id_prefix", &self.transactional_id_prefix)
            .field("partitioner", &self.partitioner)
            .field("epoch_topic", &self.epoch_topic)
            .finish()
    }
}

#[cfg(test)]
mod debug_tests {
    use super::*;

    #[test]
    fn debug_output_hides_secret_properties() {
        let raw = RawOptions::parse(
            &serde_json::json!({
                "topic": "t",
                "scan.startup.mode": "earliest-offset",
                "properties.bootstrap.servers": "b:9092",
                "properties.sasl.password": "hunter2",
                "properties.sasl.jaas.config": "x required password=\"hunter3\";",
            }),
            "sources[0].options",
            SOURCE_OPTIONS,
        )
        .unwrap();
        let source = SourceOptions::parse(&raw).unwrap();
        for shown in [format!("{raw:?}"), format!("{source:?}")] {
            assert!(
                !shown.contains("hunter2")
                    && !shown.contains("hunter3")
                    && shown.contains("b:9092"),
                "{shown}"
            );
        }
    }
}
