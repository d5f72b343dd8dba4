//! The full tier: engine tests against servers the tests start themselves (a real Kafka broker,
//! an S3-compatible server, Redis). The quick tier (`cargo test-fast`, docs/testing.md) skips every
//! test whose path contains `full::`.

mod kafka;
mod kafka_changes;
mod kafka_lateness;
mod redis;
mod s3;
