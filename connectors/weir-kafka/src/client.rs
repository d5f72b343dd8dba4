//! librdkafka clients: configuration from the options, and errors that name the cluster.

use rdkafka::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use std::collections::BTreeMap;
use std::time::Duration;
use weir_api::Error;

/// How long a metadata, offset or transaction call may take before it fails.
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// How long listing a topic's partitions may take when the job starts: a broker that is down
/// then fails the start within this time.
pub(crate) const METADATA_TIMEOUT: Duration = Duration::from_secs(10);

/// A client configuration: the bootstrap servers, then every `properties.*` option, then
/// `fixed` (what Weir sets itself; options cannot override it).
pub(crate) fn client_config(
    bootstrap_servers: &str,
    properties: &BTreeMap<String, String>,
    fixed: &[(&str, &str)],
) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap_servers);
    for (k, v) in properties {
        config.set(k, v);
    }
    for (k, v) in fixed {
        config.set(*k, *v);
    }
    config
}

/// How Weir's clients report librdkafka's error events: the end of a partition (an event Weir
/// asks for, `enable.partition.eof`, to know a bounded read is done) at debug level, every
/// other error at error level as librdkafka's default does.
pub(crate) fn report_error_event(error: &KafkaError, reason: &str) {
    if matches!(error, KafkaError::PartitionEOF(_)) {
        tracing::debug!("librdkafka: end of partition: {error}: {reason}");
    } else {
        tracing::error!("librdkafka: {error}: {reason}");
    }
}

/// The context of consumers that ask for end-of-partition events: those are not errors.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct EofIsNoError;

impl rdkafka::ClientContext for EofIsNoError {
    fn error(&self, error: KafkaError, reason: &str) {
        report_error_event(&error, reason);
    }
}

impl rdkafka::consumer::ConsumerContext for EofIsNoError {}

/// The brokers of `bootstrap_servers` (`host:port,host:port`) as places a client touches.
pub(crate) fn broker_touches(bootstrap_servers: &str) -> Vec<weir_api::Touch> {
    bootstrap_servers
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| weir_api::Touch::Url(format!("kafka://{s}")))
        .collect()
}

/// Wraps a librdkafka error with what Weir was doing and the cluster it talked to.
pub(crate) fn kafka_error(context: impl Into<String>, servers: &str, e: &KafkaError) -> Error {
    let retryable = !matches!(
        e.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::UnknownTopicOrPartition
                | RDKafkaErrorCode::TopicAuthorizationFailed
                | RDKafkaErrorCode::InvalidConfig
                | RDKafkaErrorCode::Fenced
                | RDKafkaErrorCode::ProducerFenced
                | RDKafkaErrorCode::InvalidProducerEpoch
        )
    );
    Error::external(
        "kafka",
        format!("{} (bootstrap servers {servers})", context.into()),
        e,
        retryable,
    )
}

/// Runs a blocking librdkafka call on tokio's blocking pool.
pub(crate) async fn blocking<T: Send + 'static>(
    what: &str,
    f: impl FnOnce() -> weir_api::Result<T> + Send + 'static,
) -> weir_api::Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Internal(format!("{what}: the blocking call failed: {e}")))?
}
