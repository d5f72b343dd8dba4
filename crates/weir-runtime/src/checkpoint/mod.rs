//! Epoch checkpoints in the runtime (docs/fault-tolerance.md): the coordinator, what tasks
//! report at a barrier, recovery from a durable manifest, and fail points for crash tests.
//!
//! The flow of one epoch: the coordinator publishes a trigger; every source subtask sees it
//! at its next safe point (after the batch in hand was handed on, or while it waits for a read),
//! seals its cut (each split's next-to-read cursor and watermark progress) and sends the barrier
//! down every channel. Tasks align barriers in their input gate, let their operators write
//! their state at the barrier, pre-commit their sink, take a redb MVCC view, forward the barrier
//! and write their state segments in the background, then acknowledge. With every task of the
//! plan's ACK set acknowledged, the coordinator publishes the manifest (the epoch is durable),
//! commits the sinks' transactions and records both in the epoch log.

pub(crate) mod coordinator;
pub(crate) mod damage;
pub(crate) mod epoch_stats;
pub(crate) mod recovery;

pub use weir_api::failpoint::{FAILPOINT_ENV, FAILPOINTS, failpoint};

use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use weir_api::{Epoch, OperatorId, S3Options};
use weir_checkpoint::{AttemptId, SinkTransaction, SourceSplitOffset, TaskSnapshot};
use weir_plan::ShardAssignment;
use weir_state::SegmentStore;

/// Where a job's checkpoints live: an object store and a base path in it.
#[derive(Debug, Clone)]
pub struct CheckpointLocation {
    /// The store.
    pub store: Arc<dyn ObjectStore>,
    /// The base path of every checkpoint object.
    pub base: ObjectPath,
    /// The directory the store is rooted at when it is the local file system: manifests and
    /// segments are then fsynced before and after publication.
    pub local_root: Option<PathBuf>,
    /// How to name the storage in messages.
    pub display: String,
}

impl CheckpointLocation {
    /// Checkpoints in local directory `dir` (created if missing).
    ///
    /// # Errors
    /// [`weir_api::Error::External`] when the directory cannot be created.
    pub fn local(dir: &Path) -> weir_api::Result<Self> {
        let failed = |what: &str, path: &Path, e: &dyn fmt::Display| {
            weir_api::Error::external(
                "checkpoint storage",
                format!("{what} `{}`", path.display()),
                e.to_string(),
                false,
            )
        };
        std::fs::create_dir_all(dir).map_err(|e| failed("creating", dir, &e))?;
        let root = dir
            .canonicalize()
            .map_err(|e| failed("resolving", dir, &e))?;
        // Deleting an object removes the directories it leaves empty: every retired epoch
        // used to leave its directories behind, millions in a day at 100 ms, and every
        // retention pass walked them all (an epoch took seconds instead of milliseconds).
        let store = LocalFileSystem::new_with_prefix(&root)
            .map_err(|e| failed("opening", &root, &e))?
            .with_automatic_cleanup(true);
        Ok(CheckpointLocation {
            store: Arc::new(store),
            base: ObjectPath::default(),
            local_root: Some(root),
            display: dir.display().to_string(),
        })
    }

    /// Checkpoints in an object store the caller built, under `base`; the store must support
    /// create-if-absent puts. Weir itself builds the local file system
    /// ([`CheckpointLocation::local`]) and S3 ([`CheckpointLocation::s3`]).
    pub fn object_store(store: Arc<dyn ObjectStore>, base: ObjectPath) -> Self {
        let display = format!("{store}/{base}");
        CheckpointLocation {
            store,
            base,
            local_root: None,
            display,
        }
    }

    /// Checkpoints under `url` (`s3://bucket/prefix`, or `s3a://`) on S3 or an S3-compatible
    /// server, reached with `options` over the AWS environment variables. The store publishes
    /// with create-if-absent puts (`If-None-Match: *`).
    ///
    /// # Errors
    /// [`weir_api::Error::Config`] at `checkpoint.dir` when the URL or the options cannot make
    /// a store (nothing is contacted yet).
    pub fn s3(url: &str, options: &S3Options) -> weir_api::Result<Self> {
        let invalid = |e: &dyn fmt::Display| {
            weir_api::Error::config("checkpoint.dir", format!("cannot open `{url}`: {e}"))
        };
        if !weir_api::is_s3_url(url) {
            return Err(invalid(&"not an s3:// URL"));
        }
        options.validate("checkpoint.s3")?;
        let parsed = url::Url::parse(url).map_err(|e| invalid(&e))?;
        let (store, base) =
            object_store::parse_url_opts(&parsed, options.object_store_options(std::env::vars()))
                .map_err(|e| invalid(&e))?;
        Ok(CheckpointLocation {
            store: Arc::from(store),
            base,
            local_root: None,
            display: url.to_owned(),
        })
    }

    /// The storage a spec's `checkpoint.dir` (or `weir run --checkpoint-dir`) names: a
    /// directory, a `file://` URL or an `s3://` URL, the last reached with `s3` (the
    /// `checkpoint.s3` options; defaults and the AWS environment variables when `None`).
    ///
    /// # Errors
    /// [`weir_api::Error::Config`] for another URL scheme; as [`CheckpointLocation::local`] and
    /// [`CheckpointLocation::s3`].
    pub fn from_dir_option(dir: &str, s3: Option<&S3Options>) -> weir_api::Result<Self> {
        if weir_api::is_s3_url(dir) {
            return Self::s3(dir, s3.unwrap_or(&S3Options::default()));
        }
        if s3.is_some() {
            return Err(weir_api::Error::config(
                "checkpoint.s3",
                format!("S3 options apply to an s3:// directory, but the directory is `{dir}`"),
            ));
        }
        if let Some(path) = dir.strip_prefix("file://") {
            return Self::local(Path::new(path));
        }
        if let Some((scheme, _)) = dir.split_once("://") {
            return Err(weir_api::Error::config(
                "checkpoint.dir",
                format!(
                    "`{scheme}://` storage is not built into this binary; use a local \
                     directory, a file:// or s3:// URL, or pass an object store through the \
                     `weir` crate's RunOptions"
                ),
            ));
        }
        Self::local(Path::new(dir))
    }
}

/// How a job checkpoints, resolved from its `checkpoint` section and the run options.
#[derive(Debug, Clone)]
pub struct CheckpointConfig {
    /// Time from one epoch's trigger to the next.
    pub interval: Duration,
    /// Least time from the end of one epoch to the start of the next periodic one, so that a
    /// job whose epochs take longer than the interval still gets time to process between them
    /// (Flink's `min-pause`). Manual checkpoints and the final epoch do not wait for it.
    pub min_pause: Duration,
    /// Where checkpoints go.
    pub storage: CheckpointLocation,
    /// Durable checkpoints kept (savepoints are never deleted).
    pub retain: usize,
    /// An epoch not durable after this long is aborted.
    pub timeout: Duration,
}

/// Which checkpoint a run restores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestoreFrom {
    /// The newest durable checkpoint or savepoint; a fresh start when there is none.
    Latest,
    /// The checkpoint of this epoch.
    Epoch(Epoch),
    /// The newest savepoint with this name.
    Savepoint(String),
}

impl FromStr for RestoreFrom {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s.is_empty() {
            return Err("expected `latest`, an epoch number or a savepoint name".into());
        }
        if s.eq_ignore_ascii_case("latest") {
            return Ok(RestoreFrom::Latest);
        }
        if let Ok(n) = s.parse::<u64>() {
            return Ok(RestoreFrom::Epoch(Epoch(n)));
        }
        Ok(RestoreFrom::Savepoint(s.to_owned()))
    }
}

impl fmt::Display for RestoreFrom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RestoreFrom::Latest => f.write_str("latest"),
            RestoreFrom::Epoch(e) => write!(f, "epoch {e}"),
            RestoreFrom::Savepoint(name) => write!(f, "savepoint `{name}`"),
        }
    }
}

/// The coordinator's request to the sources: inject the barrier of `epoch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Trigger {
    pub(crate) epoch: Epoch,
    /// The last epoch of a bounded job: after its barrier, sources end their input.
    pub(crate) is_final: bool,
}

/// What a task tells the coordinator.
#[derive(Debug)]
pub(crate) enum TaskReport {
    /// The task's part of an epoch.
    Ack(Box<TaskAck>),
    /// A source subtask read all its splits; it waits for the final epoch.
    SourceExhausted(weir_api::TaskId),
    /// The task ended; it takes part in later epochs with this (state-less) snapshot.
    Finished(TaskSnapshot),
    /// Writing the task's snapshot failed: the epoch cannot complete.
    Failed(crate::Error),
}

/// One task's part of an epoch.
#[derive(Debug)]
pub(crate) struct TaskAck {
    /// The attempt that took it; acknowledgements of another attempt are refused.
    pub(crate) attempt: AttemptId,
    pub(crate) epoch: Epoch,
    pub(crate) snapshot: TaskSnapshot,
    /// Cursors of the splits the source subtask has not finished.
    pub(crate) source_offsets: Vec<SourceSplitOffset>,
    /// (source operator, split) pairs the subtask finished.
    pub(crate) finished_splits: Vec<(OperatorId, String)>,
    /// The sink's pre-commit of this epoch.
    pub(crate) sink_transactions: Vec<SinkTransaction>,
    /// From the epoch's first barrier to its last at the task's input gate (zero for a task
    /// without input channels).
    pub(crate) alignment: Duration,
}

/// What a task needs to take part in checkpoints.
#[derive(Debug, Clone)]
pub(crate) struct TaskCheckpointing {
    pub(crate) attempt: AttemptId,
    pub(crate) namespace: String,
    pub(crate) segments: SegmentStore,
    /// Shards of the task's vertex when it is keyed (its state is snapshotted).
    pub(crate) shards: Option<ShardAssignment>,
    pub(crate) reports: mpsc::UnboundedSender<TaskReport>,
    /// Triggers, for source subtasks.
    pub(crate) trigger: watch::Receiver<Option<Trigger>>,
    /// The checkpoint store, where sink subtasks stage epoch output ([`sink_staging`]).
    pub(crate) store: weir_checkpoint::CheckpointStore,
}

/// The staging directory of one sink subtask in the checkpoint store,
/// `{namespace}/staging/{operator}/{subtask}/` (see [`weir_api::SinkStaging`]).
pub(crate) fn sink_staging(
    store: &weir_checkpoint::CheckpointStore,
    operator: &OperatorId,
    subtask: weir_api::SubtaskIndex,
) -> weir_api::SinkStaging {
    let dir = store
        .base()
        .clone()
        .join(store.namespace())
        .join("staging")
        .join(operator.to_string())
        .join(subtask.0.to_string());
    weir_api::SinkStaging {
        store: store.object_store().clone(),
        dir,
        local_root: store.local_root().map(Path::to_path_buf),
    }
}

impl TaskCheckpointing {
    /// Sends a report; a closed coordinator means the job is ending anyway.
    pub(crate) fn report(&self, report: TaskReport) {
        let _ = self.reports.send(report);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_path(err: weir_api::Error) -> String {
        match err {
            weir_api::Error::Config { path, .. } => path,
            other => format!("not a config error: {other}"),
        }
    }

    /// Directories under `root`, recursively.
    fn directories(root: &Path) -> usize {
        std::fs::read_dir(root)
            .expect("read_dir")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.is_dir())
            .map(|p| 1 + directories(&p))
            .sum()
    }

    /// The full tier (docs/testing.md): 8,000 file-system writes and deletes take seconds.
    mod full {
        use super::*;

        /// A day of 100 ms checkpoints, scaled down: 2,000 epochs whose nested objects are written,
        /// then deleted when the epoch retires (as retention does), leave only the directories of
        /// the epochs still kept, not one empty tree per retired epoch.
        #[tokio::test]
        async fn retired_epochs_leave_no_directories_behind() {
            use object_store::{ObjectStoreExt, PutPayload};
            let dir = tempfile::tempdir().expect("tempdir");
            let storage = CheckpointLocation::local(dir.path()).expect("storage");
            let object = |epoch: u64, subtask: u32| {
                ObjectPath::from(format!(
                    "checkpoint/job/{epoch}/window/{subtask}/0/state.parquet"
                ))
            };
            const KEPT: u64 = 3;
            for epoch in 1..=2_000_u64 {
                for subtask in 0..2 {
                    storage
                        .store
                        .put(&object(epoch, subtask), PutPayload::from_static(b"x"))
                        .await
                        .expect("put");
                }
                if epoch > KEPT {
                    for subtask in 0..2 {
                        storage
                            .store
                            .delete(&object(epoch - KEPT, subtask))
                            .await
                            .expect("delete");
                    }
                }
            }
            // `checkpoint/job` and, per kept epoch, `{epoch}/window/{0,1}/0`.
            assert_eq!(directories(dir.path()), 2 + KEPT as usize * 6);
        }
    }

    #[test]
    fn checkpoint_directories_by_scheme() {
        let s3 = CheckpointLocation::from_dir_option("s3://bucket/cp/job", None).expect("s3");
        assert_eq!(s3.display, "s3://bucket/cp/job");
        assert_eq!(s3.base.as_ref(), "cp/job");
        assert!(s3.local_root.is_none());

        let options = S3Options {
            region: Some("eu-west-1".into()),
            ..S3Options::default()
        };
        let err =
            CheckpointLocation::from_dir_option("/tmp/cp", Some(&options)).expect_err("local");
        assert_eq!(config_path(err), "checkpoint.s3");
        let err = CheckpointLocation::from_dir_option("gs://bucket/cp", None).expect_err("gcs");
        assert!(err.to_string().contains("s3://"), "{err}");

        let half = S3Options {
            access_key_id: Some("k".into()),
            ..S3Options::default()
        };
        let err = CheckpointLocation::s3("s3://bucket/cp", &half).expect_err("no secret");
        assert_eq!(config_path(err), "checkpoint.s3.secret_access_key");
    }
}
