//! What a running operator, source reader or sink writer knows about where it runs.

use crate::error::{Error, Result};
use crate::ids::{JobId, OperatorId, SubtaskIndex};
use crate::state::KeyedStateStore;
use crate::state_image::StateRows;
use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

/// The task's keyed-state backend, as operators see it: it hands each operator a store scoped to
/// (job, operator). The runtime implements it (redb by default) and commits or rolls back the
/// store's journal around every input batch.
pub trait StateBackendHandle: Send + Sync + std::fmt::Debug {
    /// A store for `operator`'s state in `job`.
    ///
    /// # Errors
    /// When the backend cannot be opened (its file, its format version).
    fn keyed_store(&self, job: &JobId, operator: &OperatorId) -> Result<Box<dyn KeyedStateStore>>;
}

/// Identity of one parallel instance of an operator, handed to it when it is created.
#[derive(Debug, Clone)]
pub struct TaskContext {
    /// The job.
    pub job_id: JobId,
    /// The operator this instance belongs to.
    pub operator_id: OperatorId,
    /// This instance's index.
    pub subtask: SubtaskIndex,
    /// How many instances the operator has.
    pub parallelism: u32,
    /// The task's keyed-state backend (`None` where the runtime gives no state, e.g. in tests).
    pub state: Option<Arc<dyn StateBackendHandle>>,
    /// Number of state shards when the operator's vertex is keyed (fed by a HASH edge): compute
    /// a key's shard with `weir_plan::key_hash::shard_ids(keys, count)`.
    pub state_shard_count: Option<u32>,
    /// Rows the operator dropped by policy (late rows, null event times): the runtime reports
    /// this count in the job summary. Add to it with `fetch_add(n, Ordering::Relaxed)`.
    pub dropped_rows: Arc<AtomicU64>,
    /// Late rows the operator routed to its late side output (late policy `route`), with rows
    /// of a null event time routed there too: the runtime exports this count per subtask. Add
    /// to it with `fetch_add(n, Ordering::Relaxed)`.
    pub late_routed_rows: Arc<AtomicU64>,
    /// Late rows that updated an already emitted result (late policy `update`, within the
    /// allowed lateness): the runtime exports this count per subtask. Add to it with
    /// `fetch_add(n, Ordering::Relaxed)`.
    pub late_updated_rows: Arc<AtomicU64>,
    /// The rows of the operator's [`StateImage`](crate::StateImage)s in the checkpoint this
    /// instance restores, only those of the state shards it owns (`None`: a fresh start, or
    /// the checkpoint holds no image of this operator).
    pub restored_image: Option<Arc<Vec<StateRows>>>,
    /// Where a sink subtask stages epoch output durably before it commits (`None` when the job
    /// does not checkpoint): set on the contexts of sink writers and of
    /// [`PreparedSink::commit_epoch`](crate::PreparedSink::commit_epoch) and
    /// [`PreparedSink::abort_uncommitted`](crate::PreparedSink::abort_uncommitted) calls.
    pub staging: Option<SinkStaging>,
    /// The lane this run is of a distributed job (`None`: the whole job runs here): set on the
    /// contexts of the run's tasks and of
    /// [`PreparedSink::commit_epochs`](crate::PreparedSink::commit_epochs) calls, so that a
    /// sink can publish the epochs of every lane together.
    pub lane: Option<Arc<Lane>>,
}

/// Where a run stands among the lanes of a distributed job: each lane is a job of its own (its
/// own id, checkpoints and epochs) reading one share of the splits. A sink that makes one
/// commit for all lanes (a Delta table's) finds the other lanes' job ids here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lane {
    /// The distributed job's id.
    pub job: JobId,
    /// This run's lane: its index in `jobs`.
    pub index: u32,
    /// The job id of every lane, in lane order (this run's is `jobs[index]`).
    pub jobs: Vec<JobId>,
}

/// Durable storage private to one sink subtask, inside the job's checkpoint store
/// (`{namespace}/staging/{operator}/{subtask}/`): a sink that cannot hold a transaction open
/// across a crash (Kafka) writes an epoch's output here at pre-commit, and publishes it from
/// here at commit, so that recovery can publish it again.
#[derive(Debug, Clone)]
pub struct SinkStaging {
    /// The checkpoint store.
    pub store: Arc<dyn ObjectStore>,
    /// The subtask's staging directory in `store`.
    pub dir: ObjectPath,
    /// The local directory `store` is rooted at when it is the local file system, which never
    /// `fsync`s by itself: a staged object is durable only after [`SinkStaging::sync_local`].
    pub local_root: Option<PathBuf>,
}

impl SinkStaging {
    /// Makes the object at `location` (written with [`SinkStaging::store`]) durable on a local
    /// file system: `fsync`s the file and every directory from its own up to the local root.
    /// Does nothing for other stores, which are durable when a put returns. Blocking: call it
    /// on a blocking thread.
    ///
    /// # Errors
    /// [`Error::External`] naming the file when it cannot be opened or synced.
    pub fn sync_local(&self, location: &ObjectPath) -> Result<()> {
        let Some(root) = &self.local_root else {
            return Ok(());
        };
        let mut path = root.clone();
        for part in location.parts() {
            path.push(part.as_ref());
        }
        let sync = |p: &std::path::Path| {
            std::fs::File::open(p)
                .and_then(|f| f.sync_all())
                .map_err(|e| {
                    Error::external("file system", format!("syncing {}", p.display()), e, true)
                })
        };
        sync(&path)?;
        let mut dir = path.parent();
        while let Some(d) = dir {
            sync(d)?;
            if d == root.as_path() {
                break;
            }
            dir = d.parent();
        }
        Ok(())
    }
}

impl TaskContext {
    /// A context without a state backend.
    pub fn new(
        job_id: JobId,
        operator_id: OperatorId,
        subtask: SubtaskIndex,
        parallelism: u32,
    ) -> Self {
        TaskContext {
            job_id,
            operator_id,
            subtask,
            parallelism,
            state: None,
            state_shard_count: None,
            dropped_rows: Arc::default(),
            late_routed_rows: Arc::default(),
            late_updated_rows: Arc::default(),
            restored_image: None,
            staging: None,
            lane: None,
        }
    }

    /// A short label for logs and error messages: `operator[subtask/parallelism]`.
    pub fn label(&self) -> String {
        format!(
            "{}[{}/{}]",
            self.operator_id, self.subtask, self.parallelism
        )
    }

    /// This operator's keyed-state store: state scoped to (job, operator, shard, key).
    ///
    /// # Errors
    /// [`Error::Internal`] when the task runs without a state backend; backend open errors.
    pub fn keyed_state(&self) -> Result<Box<dyn KeyedStateStore>> {
        let backend = self.state.as_ref().ok_or_else(|| {
            Error::Internal(format!("{} runs without a state backend", self.label()))
        })?;
        backend.keyed_store(&self.job_id, &self.operator_id)
    }
}
