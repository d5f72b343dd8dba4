//! Weir's Kafka connector: a source whose splits are topic-partitions and a sink that writes
//! exactly once through Kafka transactions.

mod format;
