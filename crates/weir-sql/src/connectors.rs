//! The connectors a `CREATE TABLE` can name: the job-spec connector each becomes and the
//! `WITH` options of each role.

/// One `WITH` option: its SQL key, the connector option it becomes, whether it is a number.
pub(crate) type OptionMap = (&'static str, &'static str, bool);

/// How a `connector` is read and written: the job-spec connector and the options of each role.
pub(crate) struct Connector {
    pub(crate) sql: &'static [&'static str],
    pub(crate) spec: &'static str,
    /// Options of each role; `None` for a role the connector cannot play.
    pub(crate) read: Option<&'static [OptionMap]>,
    pub(crate) write: Option<&'static [OptionMap]>,
    /// Options of both roles (besides `read` and `write`).
    pub(crate) common: &'static [OptionMap],
    /// `prefix.<column>.<option>` keys gathered into one map option (datagen's `fields`).
    pub(crate) prefix_maps: &'static [(&'static str, &'static str)],
    /// Key prefixes passed to the connector as they are (Kafka's `properties.*`).
    pub(crate) passthrough: &'static [&'static str],
    /// Which roles take a table's `PARTITIONED BY` columns, as the option `partition_by` (a
    /// list of column names).
    pub(crate) partitions: Partitions,
}

/// What a connector does with a table's `PARTITIONED BY` columns.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Partitions {
    /// The clause is refused.
    Refused,
    /// Its sink takes `partition_by`; its source reads the partitions from the table itself
    /// (the clause is accepted, and not passed on).
    Sink,
    /// Source and sink take `partition_by`.
    Both,
}

/// Options of both roles of the `kafka` connector: Flink's names, passed on unchanged.
const KAFKA_COMMON: [OptionMap; 9] = [
    ("topic", "topic", false),
    ("format", "format", false),
    ("value.format", "value.format", false),
    ("key.format", "key.format", false),
    ("key.fields", "key.fields", false),
    ("key.fields-prefix", "key.fields-prefix", false),
    ("value.fields-include", "value.fields-include", false),
    ("csv.field-delimiter", "csv.field-delimiter", false),
    (
        "properties.bootstrap.servers",
        "properties.bootstrap.servers",
        false,
    ),
];

/// Options of a `kafka` table read as a source, besides [`KAFKA_COMMON`].
const KAFKA_READ: [OptionMap; 8] = [
    ("scan.startup.mode", "scan.startup.mode", false),
    (
        "scan.startup.timestamp-millis",
        "scan.startup.timestamp-millis",
        false,
    ),
    (
        "scan.startup.specific-offsets",
        "scan.startup.specific-offsets",
        false,
    ),
    ("scan.bounded.mode", "scan.bounded.mode", false),
    (
        "scan.bounded.timestamp-millis",
        "scan.bounded.timestamp-millis",
        false,
    ),
    (
        "scan.bounded.specific-offsets",
        "scan.bounded.specific-offsets",
        false,
    ),
    (
        "scan.topic-partition-discovery.interval",
        "scan.topic-partition-discovery.interval",
        false,
    ),
    ("scan.batch-size", "scan.batch-size", false),
];

/// Options of a `kafka` table written as a sink, besides [`KAFKA_COMMON`].
const KAFKA_WRITE: [OptionMap; 4] = [
    ("sink.delivery-guarantee", "sink.delivery-guarantee", false),
    (
        "sink.transactional-id-prefix",
        "sink.transactional-id-prefix",
        false,
    ),
    ("sink.partitioner", "sink.partitioner", false),
    ("sink.epoch-topic", "sink.epoch-topic", false),
];

pub(crate) const CONNECTORS: &[Connector] = &[
    Connector {
        sql: &["filesystem", "file"],
        spec: "file",
        read: Some(&[
            ("path", "path", false),
            ("format", "format", false),
            ("batch-size", "batch_size", true),
            ("split-size", "split_size", true),
            ("csv.field-delimiter", "delimiter", false),
            ("csv.has-header", "has_header", false),
            ("max-buffer-bytes", "max_buffer_bytes", true),
        ]),
        write: Some(&[
            ("path", "path", false),
            ("format", "format", false),
            ("sink.rows-per-file", "rows_per_file", true),
            ("sink.bytes-per-file", "bytes_per_file", true),
            // Flink's rolling policy and compaction; a size may be '128MB', an interval '15 min'.
            ("sink.rolling-policy.file-size", "bytes_per_file", false),
            (
                "sink.rolling-policy.rollover-interval",
                "rollover_interval",
                false,
            ),
            ("auto-compaction", "auto_compaction", false),
            ("compaction.file-size", "compaction_file_size", false),
            ("parquet.compression", "compression", false),
            ("sink.max-open-partitions", "max_open_partitions", true),
            (
                "sink.partition-commit.policy.kind",
                "partition_commit_policy",
                false,
            ),
            (
                "sink.partition-commit.trigger",
                "partition_commit_trigger",
                false,
            ),
            (
                "sink.partition-commit.delay",
                "partition_commit_delay",
                false,
            ),
            (
                "sink.partition-commit.success-file.name",
                "partition_success_file_name",
                false,
            ),
            (
                "partition.time-extractor.timestamp-pattern",
                "partition_time_pattern",
                false,
            ),
        ]),
        prefix_maps: &[],
        common: &[],
        passthrough: &[],
        partitions: Partitions::Both,
    },
    Connector {
        sql: &["delta"],
        spec: "delta",
        read: Some(&[
            ("path", "path", false),
            ("scan.startup.version", "version", true),
            ("batch-size", "batch_size", true),
        ]),
        write: Some(&[
            ("path", "path", false),
            ("sink.target-file-size", "target_file_size", true),
            ("delta.checkpointInterval", "checkpoint_interval", true),
            ("auto-compaction", "auto_compaction", false),
            ("compaction.file-size", "compaction_file_size", true),
            ("compaction.min-files", "compaction_min_files", true),
        ]),
        prefix_maps: &[],
        common: &[],
        passthrough: &[],
        partitions: Partitions::Sink,
    },
    Connector {
        sql: &["datagen"],
        spec: "datagen",
        read: Some(&[
            ("number-of-rows", "rows", true),
            ("rows", "rows", true),
            ("seed", "seed", true),
            ("splits", "splits", true),
            ("batch-size", "batch_size", true),
        ]),
        write: None,
        prefix_maps: &[("fields.", "fields")],
        common: &[],
        passthrough: &[],
        partitions: Partitions::Refused,
    },
    Connector {
        sql: &["blackhole"],
        spec: "blackhole",
        read: None,
        write: Some(&[("rows-per-second", "rows_per_second", true)]),
        prefix_maps: &[],
        common: &[],
        passthrough: &[],
        partitions: Partitions::Refused,
    },
    Connector {
        sql: &["kafka"],
        spec: "kafka",
        read: Some(&KAFKA_READ),
        write: Some(&KAFKA_WRITE),
        common: &KAFKA_COMMON,
        prefix_maps: &[],
        passthrough: &["properties."],
        partitions: Partitions::Refused,
    },
    Connector {
        sql: &["upsert-kafka"],
        spec: "upsert-kafka",
        read: Some(&KAFKA_READ),
        write: Some(&KAFKA_WRITE),
        common: &UPSERT_KAFKA_COMMON,
        prefix_maps: &[],
        passthrough: &["properties."],
        partitions: Partitions::Refused,
    },
];

/// Options of both roles of the `upsert-kafka` connector: Flink's names. Its key columns are
/// the table's PRIMARY KEY, so there is no `key.fields`, and no `format` (`key.format` and
/// `value.format` both).
const UPSERT_KAFKA_COMMON: [OptionMap; 7] = [
    ("topic", "topic", false),
    ("value.format", "value.format", false),
    ("key.format", "key.format", false),
    ("key.fields-prefix", "key.fields-prefix", false),
    ("value.fields-include", "value.fields-include", false),
    ("csv.field-delimiter", "csv.field-delimiter", false),
    (
        "properties.bootstrap.servers",
        "properties.bootstrap.servers",
        false,
    ),
];

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::SqlCompiler;

    fn script(with: &str) -> String {
        format!(
            "CREATE TABLE t (a BIGINT) WITH ('connector' = 'filesystem', 'path' = 'in.csv', \
             'format' = 'csv');\n\
             CREATE TABLE o (a BIGINT) WITH ('connector' = 'filesystem', 'path' = 'out', \
             'format' = 'parquet'{with});\n\
             INSERT INTO o SELECT a FROM t;"
        )
    }

    #[tokio::test]
    async fn flink_rolling_and_compaction_options_reach_the_file_sink() {
        let compiler = SqlCompiler::new();
        let spec = compiler
            .compile(
                &script(
                    ", 'sink.rolling-policy.file-size' = '128MB', \
                     'sink.rolling-policy.rollover-interval' = '15 min', \
                     'auto-compaction' = 'true', 'compaction.file-size' = '64MB'",
                ),
                "roll.sql",
            )
            .await
            .expect("compiles")
            .spec;
        let options = &spec.sinks[0].options;
        assert_eq!(options["bytes_per_file"], "128MB");
        assert_eq!(options["rollover_interval"], "15 min");
        assert_eq!(options["auto_compaction"], true);
        assert_eq!(options["compaction_file_size"], "64MB");

        let err = compiler
            .compile(
                &script(", 'sink.bytes-per-file' = '100', 'sink.rolling-policy.file-size' = '1MB'"),
                "twice.sql",
            )
            .await
            .expect_err("two spellings of one option");
        let text = err.to_string();
        assert!(text.starts_with("twice.sql:2:"), "{text}");
        assert!(
            text.contains("'sink.bytes-per-file' and 'sink.rolling-policy.file-size'"),
            "{text}"
        );
    }
}
