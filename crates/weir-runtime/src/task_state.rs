//! The keyed-state backend of one task: opened on first use, its journal committed after every
//! input whose output was handed on, rolled back when the task fails, and made durable on the
//! blocking pool at every checkpoint barrier and at least every [`SYNC_EVERY`] of commits.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use weir_api::{JobId, KeyedStateStore, OperatorId, StateBackendHandle, StateShardId, TaskId};
use weir_state::{RedisConfig, StateBackend, SystemClock};

/// The longest a task's commits stay without a durable commit when no barrier comes (jobs
/// without checkpoints): redb reuses the pages freed since the last durable commit only after
/// the next one, so this bounds the growth of the file.
pub(crate) const SYNC_EVERY: Duration = Duration::from_secs(5);

/// Where a run's tasks keep keyed state.
#[derive(Debug, Clone)]
pub(crate) enum StatePlacement {
    /// One redb file per task under `dir`.
    Redb {
        dir: PathBuf,
        /// The directory outlives the job (a user's state directory), so the end of input
        /// makes the files durable. A temporary one is deleted when the job ends, so that
        /// fsync would be wasted.
        kept: bool,
    },
    /// The job's namespace in a Redis server.
    Redis(RedisConfig),
}

/// One task's keyed state, shared by the operators of its chain.
#[derive(Debug)]
pub(crate) struct TaskState {
    placement: StatePlacement,
    task: TaskId,
    /// The `(operator, shard)` pairs of this task, cleared in Redis when it opens: a task
    /// starts from empty state or a restore, as it does on a fresh redb file.
    owned: Vec<(OperatorId, StateShardId)>,
    /// The vertex is not keyed and has more than one subtask: every subtask would write shard
    /// 0, which only a file per task keeps apart.
    shares_shard: bool,
    backend: OnceLock<StateBackend>,
    /// When the last durable commit was made (or the task started).
    synced_at: Mutex<Instant>,
}

impl TaskState {
    pub(crate) fn new(
        placement: StatePlacement,
        task: TaskId,
        owned: Vec<(OperatorId, StateShardId)>,
        shares_shard: bool,
    ) -> Arc<Self> {
        Arc::new(TaskState {
            placement,
            task,
            owned,
            shares_shard,
            backend: OnceLock::new(),
            synced_at: Mutex::new(Instant::now()),
        })
    }

    /// Whether the state outlives the job (a kept state directory, or Redis), so that the end
    /// of input writes and syncs it.
    pub(crate) fn kept(&self) -> bool {
        match &self.placement {
            StatePlacement::Redb { kept, .. } => *kept,
            StatePlacement::Redis(_) => true,
        }
    }

    fn backend(&self) -> weir_api::Result<&StateBackend> {
        if let Some(b) = self.backend.get() {
            return Ok(b);
        }
        let clock = Arc::new(SystemClock);
        let opened = match &self.placement {
            StatePlacement::Redb { dir, .. } => {
                StateBackend::open_redb_for_task(dir, &self.task, clock)?
            }
            StatePlacement::Redis(_) if self.shares_shard => {
                return Err(weir_api::Error::Config {
                    path: "state.backend".to_owned(),
                    message: format!(
                        "vertex `{}` is not keyed and runs more than one subtask: keyed state \
                         in Redis needs a keyed vertex (its subtasks would share shard 0); key \
                         its input or use the redb backend",
                        self.task.vertex
                    ),
                });
            }
            StatePlacement::Redis(config) => {
                StateBackend::connect_redis(config, &self.task.job, &self.owned, clock)?
            }
        };
        // A chain's operators are created one after another on one thread: no race to lose.
        Ok(self.backend.get_or_init(|| opened))
    }

    /// The backend if an operator opened it (a chain without state never does).
    pub(crate) fn opened(&self) -> Option<&StateBackend> {
        self.backend.get()
    }

    /// Loads `segments` into a fresh backend before any operator is created: the task's state
    /// file (or its shards in Redis) is replaced by the checkpoint's state. The segments of an
    /// operator in `renames` (old -> new) load as its new id's state.
    ///
    /// # Errors
    /// When the file cannot be replaced, or a segment is missing, corrupt or incompatible.
    pub(crate) async fn restore(
        &self,
        segments: &[weir_state::SegmentDescriptor],
        store: &weir_state::SegmentStore,
        renames: &std::collections::HashMap<weir_api::OperatorId, weir_api::OperatorId>,
    ) -> weir_api::Result<weir_state::RestoreReport> {
        if let StatePlacement::Redb { dir, .. } = &self.placement {
            let path = weir_state::task_state_file(dir, &self.task);
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(weir_api::Error::external(
                        "state backend",
                        format!("replacing `{}` for a restore", path.display()),
                        e.to_string(),
                        false,
                    ));
                }
            }
        }
        let backend = self.backend()?;
        let options = renames
            .iter()
            .fold(weir_state::RestoreOptions::new(), |o, (from, to)| {
                o.rename(from, to)
            });
        let report = store.restore(backend, segments, &options).await?;
        self.sync().await?;
        Ok(report)
    }

    /// Commits the mutations staged since the last commit, without an fsync (no-op for
    /// stateless chains): visible to every later read and snapshot, durable after [`Self::sync`].
    pub(crate) fn commit(&self) -> weir_api::Result<()> {
        match self.backend.get() {
            Some(b) if b.staged_len() > 0 => Ok(b.commit()?),
            _ => Ok(()),
        }
    }

    /// Makes every commit so far durable, on the blocking pool: the fsync never holds an async
    /// worker. The task awaits it, so no commit of its own waits on redb's writer meanwhile.
    pub(crate) async fn sync(&self) -> weir_api::Result<()> {
        let Some(backend) = self.backend.get().filter(|b| b.needs_sync()).cloned() else {
            return Ok(());
        };
        tokio::task::spawn_blocking(move || backend.sync())
            .await
            .map_err(|e| weir_api::Error::Internal(format!("syncing keyed state: {e}")))??;
        *self
            .synced_at
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Instant::now();
        Ok(())
    }

    /// [`Self::sync`] when the last durable commit is [`SYNC_EVERY`] old.
    pub(crate) async fn sync_if_due(&self) -> weir_api::Result<()> {
        let due = self
            .synced_at
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .elapsed()
            >= SYNC_EVERY;
        if due { self.sync().await } else { Ok(()) }
    }

    /// Discards the mutations staged since the last commit.
    pub(crate) fn rollback(&self) {
        if let Some(b) = self.backend.get() {
            b.rollback();
        }
    }
}

impl StateBackendHandle for TaskState {
    fn keyed_store(
        &self,
        job: &JobId,
        operator: &OperatorId,
    ) -> weir_api::Result<Box<dyn KeyedStateStore>> {
        Ok(Box::new(self.backend()?.keyed_store(job, operator)))
    }
}
