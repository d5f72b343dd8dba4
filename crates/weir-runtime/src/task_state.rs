//! The keyed-state backend of one task: opened on first use, its journal committed after every
//! input whose output was handed on, rolled back when the task fails.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use weir_api::{JobId, KeyedStateStore, OperatorId, StateBackendHandle, TaskId};
use weir_state::{RedbStateBackend, SystemClock};

/// One task's redb state, shared by the operators of its chain.
#[derive(Debug)]
pub(crate) struct TaskState {
    dir: PathBuf,
    task: TaskId,
    backend: OnceLock<RedbStateBackend>,
}

impl TaskState {
    pub(crate) fn new(dir: PathBuf, task: TaskId) -> Arc<Self> {
        Arc::new(TaskState {
            dir,
            task,
            backend: OnceLock::new(),
        })
    }

    fn backend(&self) -> weir_api::Result<&RedbStateBackend> {
        if let Some(b) = self.backend.get() {
            return Ok(b);
        }
        let opened = RedbStateBackend::open_for_task(&self.dir, &self.task, Arc::new(SystemClock))?;
        // A chain's operators are created one after another on one thread: no race to lose.
        Ok(self.backend.get_or_init(|| opened))
    }

    /// Makes the mutations staged since the last commit durable (no-op for stateless chains).
    pub(crate) fn commit(&self) -> weir_api::Result<()> {
        match self.backend.get() {
            Some(b) if b.staged_len() > 0 => Ok(b.commit()?),
            _ => Ok(()),
        }
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
