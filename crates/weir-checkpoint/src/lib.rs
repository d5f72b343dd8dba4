//! Weir's checkpoint storage (docs/checkpoints.md): the epoch manifest, its validation,
//! atomic publication, recovery's choice of manifest, the epoch log and retention, in an object
//! store next to the state segments of `weir-state`.
//!
//! This crate owns:
//! - [`EpochManifest`]: the one entry point of recovery, stored as canonical JSON with a
//!   SHA-256 checksum ([`manifest`] documents the exact rule);
//! - [`ExpectedCheckpoint`]: what a complete checkpoint of a `PartitionedPlan` contains (its
//!   `checkpoint_ack_set`, fingerprints, shards, input channels), validation against it, and
//!   whether it can restore a manifest taken at another parallelism;
//! - [`CheckpointStore`]: the [`layout`] of a checkpoint namespace, create-if-absent
//!   publication (durable on a local file system with [`CheckpointStore::with_local_root`]),
//!   attempt fencing ([`CheckpointStore::acquire_attempt`]), listing and reading manifests,
//!   [`CheckpointStore::latest_durable`] with fallback past damaged manifests and restore at
//!   another parallelism, and retention ([`CheckpointStore::retain`]);
//! - [`EpochLog`] and the epoch lifecycle ([`EpochState`], [`transition`]).
//!
//! It is a library: nothing here injects barriers, coordinates tasks or restores state (see
//! `docs/checkpoints.md`). Among Weir crates it depends on `weir-api`, `weir-plan` and
//! `weir-state`; it must not depend on the runtime, a transport, connectors or DataFusion.
//!
//! ```
//! use std::sync::Arc;
//! use object_store::memory::InMemory;
//! use object_store::path::Path;
//! use weir_api::Epoch;
//! use weir_checkpoint::{CheckpointStore, ExpectedCheckpoint, PublishOutcome, TaskSnapshot};
//! use weir_plan::{CompiledPlans, JobSpec};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
//! let spec = JobSpec::from_yaml_str(r#"
//! job: demo
//! parallelism: 2
//! sources:
//!   - { name: bids, connector: datagen, schema: [{ name: a, type: int64 }], options: { rows: 10 } }
//! sinks: [{ name: out, connector: blackhole, input: bids }]
//! "#, "demo.yaml")?;
//! let plan = CompiledPlans::compile(&spec, Some("demo.yaml"))?.partitioned;
//! let expected = ExpectedCheckpoint::from_plan(&plan);
//! let store = CheckpointStore::try_new(Arc::new(InMemory::new()), Path::from("ckpt"), "demo")?;
//!
//! // Segments are written first (weir_state::SegmentStore), then the manifest is published.
//! let attempt = store.acquire_attempt().await?;
//! let mut manifest = expected.manifest_template("demo", Epoch(1), attempt);
//! manifest.task_snapshots = expected.tasks().iter().map(|task| TaskSnapshot {
//!     task: task.clone(), segments: vec![], input_watermarks: vec![],
//! }).collect();
//! assert_eq!(store.publish_manifest(&manifest, &expected).await?, PublishOutcome::Published);
//!
//! let latest = store.latest_durable(&expected).await?;
//! assert_eq!(latest.manifest.map(|m| m.epoch), Some(Epoch(1)));
//! # Ok::<_, Box<dyn std::error::Error>>(()) })
//! # }
//! ```

pub mod epoch_log;
mod error;
mod fencing;
pub mod layout;
mod lifecycle;
mod local_sync;
pub mod manifest;
mod problem;
mod retention;
mod store;
mod validate;

pub use epoch_log::{
    EpochLog, EpochLogView, EpochRecord, EpochState, LOG_FORMAT_VERSION, RecordOutcome, transition,
};
pub use error::{CheckpointError, CheckpointResult, SegmentIssue};
pub use manifest::{
    AttemptId, EnumeratorSnapshot, EpochKind, EpochManifest, InputWatermark,
    MANIFEST_FORMAT_VERSION, SinkTransaction, SourceSplitOffset, TaskSnapshot, stored_checksums,
};
pub use problem::ManifestProblem;
pub use retention::RetentionReport;
pub use store::{
    CheckpointStore, DamagedSegment, LatestDurable, PublishOutcome, RestorePoint, SkippedManifest,
};
pub use validate::{ExpectedCheckpoint, structural_problems};

#[cfg(test)]
mod copy_tests;
#[cfg(test)]
mod fencing_tests;
/// The full tier (docs/testing.md): publication on a real S3-compatible server.
#[cfg(test)]
#[path = "s3_tests.rs"]
mod full;
#[cfg(test)]
mod image_tests;
#[cfg(test)]
mod log_tests;
#[cfg(test)]
mod restore_tests;
#[cfg(test)]
mod retention_tests;
#[cfg(test)]
mod store_tests;
#[cfg(test)]
mod test_support;
