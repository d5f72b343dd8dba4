//! Keyed state for operator unit tests: a redb backend in a temporary directory.

use std::sync::Arc;
use weir_api::{
    JobId, KeyedStateStore, OperatorId, Result, StateBackendHandle, SubtaskIndex, TaskContext,
};
use weir_state::{StateBackend, StateClock, SystemClock};

/// A redb backend in a directory of its own, removed when dropped.
#[derive(Debug)]
pub(crate) struct Backend {
    dir: std::path::PathBuf,
    pub(crate) redb: StateBackend,
}

impl Backend {
    /// A backend on the wall clock.
    pub(crate) fn new(name: &str) -> Arc<Self> {
        Self::with_clock(name, Arc::new(SystemClock))
    }

    /// A backend whose TTLs run on `clock`.
    pub(crate) fn with_clock(name: &str, clock: Arc<dyn StateClock>) -> Arc<Self> {
        let dir =
            std::env::temp_dir().join(format!("weir-operator-state-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let redb = StateBackend::open_redb(&dir.join("state.redb"), clock).expect("redb");
        Arc::new(Self { dir, redb })
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl StateBackendHandle for Backend {
    fn keyed_store(&self, job: &JobId, operator: &OperatorId) -> Result<Box<dyn KeyedStateStore>> {
        Ok(Box::new(self.redb.keyed_store(job, operator)))
    }
}

/// A context of subtask 0 of 1 over `backend`, with 4 state shards.
pub(crate) fn ctx(backend: &Arc<Backend>) -> TaskContext {
    let mut ctx = TaskContext::new(JobId::new("j"), OperatorId::new("g"), SubtaskIndex(0), 1);
    ctx.state = Some(Arc::clone(backend) as Arc<dyn StateBackendHandle>);
    ctx.state_shard_count = Some(4);
    ctx
}
