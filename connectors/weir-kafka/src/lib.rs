//! Weir's Kafka connector: a source whose splits are topic-partitions and a sink that writes
//! exactly once through Kafka transactions (docs/connectors/kafka.md).
//!
//! This crate depends on `weir-api` only: the facade registers [`KafkaSourceFactory`] and
//! [`KafkaSinkFactory`] under the connector name `kafka`, and [`UpsertKafkaSourceFactory`] and
//! [`UpsertKafkaSinkFactory`] under `upsert-kafka`. Options are Flink's Kafka SQL
//! connector names (`'properties.bootstrap.servers'`, `'scan.startup.mode'`,
//! `'sink.delivery-guarantee'`, ...), in SQL and in job specs alike.
//!
//! - **Source**: every partition of the topics is a split, read from its own partition queue of
//!   the subtask's consumer; a split's cursor is the next offset to read, so a restore resumes
//!   exactly after the records the checkpoint covers. read_committed by default.
//! - **Sink**: exactly-once stages each epoch's rows in the checkpoint store at the barrier and
//!   produces them in one Kafka transaction, with a marker in the sink's epoch topic, once the
//!   epoch is durable (see the `sink` module); at-least-once flushes at every barrier.

mod client;
mod epoch_topic;
mod format;
mod options;
mod producer;
mod reader;
mod sink;
mod source;

pub use sink::{KafkaSinkFactory, UpsertKafkaSinkFactory};
pub use source::{KafkaSourceFactory, UpsertKafkaSourceFactory};
