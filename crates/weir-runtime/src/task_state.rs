//! The keyed-state backend of one task: opened on first use, its journal committed after every
//! input whose output was handed on, rolled back when the task fails, and made durable on the
//! blocking pool at every checkpoint barrier and at least every [`SYNC_EVERY`] of commits.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use weir_api::{JobId, KeyedStateStore, OperatorId, StateBackendHandle, TaskId};
use weir_state::{RedbStateBackend, SystemClock};

/// The longest a task's commits stay without a durable commit when no barrier comes (jobs
/// without checkpoints): redb reuses the pages freed since the last durable commit only after
/// the next one, so this bounds the growth of the file.
pub(crate) const SYNC_EVERY: Duration = Duration::from_secs(5);

/// One task's redb state, shared by the operators of its chain.
#[derive(Debug)]
pub(crate) struct TaskState {
    dir: PathBuf,
    task: TaskId,
    backend: OnceLock<RedbStateBackend>,
    /// When the last durable commit was made (or the task started).
    synced_at: Mutex<Instant>,
    /// The file outlives the job (a user's state directory): make it durable at the end of
    /// input too. A temporary file is deleted when the job ends, so that fsync would be wasted.
    kept: bool,
}

impl TaskState {
    pub(crate) fn new(dir: PathBuf, task: TaskId, kept: bool) -> Arc<Self> {
        Arc::new(TaskState {
            dir,
            task,
            backend: OnceLock::new(),
            synced_at: Mutex::new(Instant::now()),
            kept,
        })
    }

    /// Whether the file outlives the job, so that the end of input makes it durable.
    pub(crate) fn kept(&self) -> bool {
        self.kept
    }

    fn backend(&self) -> weir_api::Result<&RedbStateBackend> {
        if let Some(b) = self.backend.get() {
            return Ok(b);
        }
        let opened = RedbStateBackend::open_for_task(&self.dir, &self.task, Arc::new(SystemClock))?;
        // A chain's operators are created one after another on one thread: no race to lose.
        Ok(self.backend.get_or_init(|| opened))
    }

    /// The backend if an operator opened it (a chain without state never does).
    pub(crate) fn opened(&self) -> Option<&RedbStateBackend> {
        self.backend.get()
    }

    /// Loads `segments` into a fresh backend before any operator is created: the task's state
    /// file is replaced by the checkpoint's state. The segments of an operator in `renames`
    /// (old -> new) load as its new id's state.
    ///
    /// # Errors
    /// When the file cannot be replaced, or a segment is missing, corrupt or incompatible.
    pub(crate) async fn restore(
        &self,
        segments: &[weir_state::SegmentDescriptor],
        store: &weir_state::SegmentStore,
        renames: &std::collections::HashMap<weir_api::OperatorId, weir_api::OperatorId>,
    ) -> weir_api::Result<weir_state::RestoreReport> {
        let path = weir_state::task_state_file(&self.dir, &self.task);
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
