//! The epoch topic of exactly-once sinks: each sink transaction also writes a marker
//! (key: the transactional id, value: the epoch) to this one-partition, compacted topic, so that
//! after a crash recovery can tell whether an epoch's transaction committed.

use crate::client::{CALL_TIMEOUT, client_config, kafka_error};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use std::collections::BTreeMap;
use std::time::Instant;
use weir_api::{Error, Result};

/// The marker's value.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct EpochMarker {
    /// The newest epoch the transaction committed.
    pub(crate) epoch: u64,
}

/// Creates the epoch topic (one partition, compacted) unless it exists.
pub(crate) async fn ensure(
    servers: &str,
    properties: &BTreeMap<String, String>,
    topic: &str,
) -> Result<()> {
    let admin: AdminClient<DefaultClientContext> = client_config(servers, properties, &[])
        .create()
        .map_err(|e| kafka_error("creating an admin client", servers, &e))?;
    let new = NewTopic::new(topic, 1, TopicReplication::Fixed(-1)).set("cleanup.policy", "compact");
    let results = admin
        .create_topics(
            [&new],
            &AdminOptions::new().operation_timeout(Some(CALL_TIMEOUT)),
        )
        .await
        .map_err(|e| kafka_error(format!("creating the epoch topic `{topic}`"), servers, &e))?;
    for result in results {
        match result {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((_, code)) => {
                return Err(Error::external(
                    "kafka",
                    format!("creating the epoch topic `{topic}` (bootstrap servers {servers})"),
                    code,
                    true,
                ));
            }
        }
    }
    Ok(())
}

/// The newest epoch whose marker for `transactional_id` is committed in the epoch topic, read
/// to its end with a read_committed consumer. Blocking.
pub(crate) fn last_committed(
    servers: &str,
    properties: &BTreeMap<String, String>,
    topic: &str,
    transactional_id: &str,
) -> Result<Option<u64>> {
    let failed = |e: &KafkaError| {
        kafka_error(
            format!("reading the epoch topic `{topic}` for `{transactional_id}`"),
            servers,
            e,
        )
    };
    let consumer: BaseConsumer<crate::client::EofIsNoError> = client_config(
        servers,
        properties,
        &[
            ("group.id", "weir-epoch-reader"),
            ("enable.auto.commit", "false"),
            ("isolation.level", "read_committed"),
            ("enable.partition.eof", "true"),
        ],
    )
    .create_with_context(crate::client::EofIsNoError)
    .map_err(|e| failed(&e))?;
    let (low, high) = consumer
        .fetch_watermarks(topic, 0, CALL_TIMEOUT)
        .map_err(|e| failed(&e))?;
    if high <= low {
        return Ok(None);
    }
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .map_err(|e| failed(&e))?;
    consumer.assign(&tpl).map_err(|e| failed(&e))?;
    let deadline = Instant::now() + CALL_TIMEOUT;
    let mut newest = None;
    loop {
        if Instant::now() > deadline {
            return Err(Error::external(
                "kafka",
                format!("reading the epoch topic `{topic}` (bootstrap servers {servers})"),
                format!("its end was not reached within {CALL_TIMEOUT:?}"),
                true,
            ));
        }
        match consumer.poll(std::time::Duration::from_millis(500)) {
            None => {}
            Some(Err(KafkaError::PartitionEOF(_))) => return Ok(newest),
            Some(Err(e)) => return Err(failed(&e)),
            Some(Ok(m)) => {
                if m.key() != Some(transactional_id.as_bytes()) {
                    continue;
                }
                let Some(payload) = m.payload() else { continue };
                let marker: EpochMarker = serde_json::from_slice(payload).map_err(|e| {
                    Error::external(
                        "kafka",
                        format!("reading the epoch topic `{topic}`"),
                        format!(
                            "the marker at offset {} is not an epoch marker: {e}",
                            m.offset()
                        ),
                        false,
                    )
                })?;
                newest = Some(newest.map_or(marker.epoch, |n: u64| n.max(marker.epoch)));
            }
        }
    }
}
