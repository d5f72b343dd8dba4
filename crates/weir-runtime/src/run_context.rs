//! What a run of a job is given and what every attempt of it shares: the executor creates them
//! once, each attempt (`attempt/`) reads them.

use crate::checkpoint::coordinator::ManualCheckpoint;
use crate::checkpoint::epoch_stats::SharedSummary;
use crate::checkpoint::{CheckpointConfig, CheckpointLocation, RestoreFrom};
use crate::metrics::JobMetrics;
use crate::prepare::PreparedJob;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::{mpsc, watch};

/// How a job runs on this machine.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Directory of the tasks' keyed-state files (one redb file per task). When `None`, a fresh
    /// directory under the system's temporary directory is used and removed when the job ends:
    /// state outlives a run only through checkpoints.
    pub state_dir: Option<PathBuf>,
    /// Where checkpoints go; overrides the job's `checkpoint.dir`. Only used when the job has a
    /// `checkpoint` section.
    pub checkpoint_storage: Option<CheckpointLocation>,
    /// The checkpoint to restore before reading any input.
    pub restore: Option<RestoreFrom>,
    /// Lets a restore pass over durable epochs (a damaged newest checkpoint, an older epoch
    /// asked for) although a sink that commits by epoch cannot withdraw what it published for
    /// them: that output may then be published twice. Without it such a restore is refused.
    /// Sinks that can withdraw (the file sink) withdraw either way.
    pub accept_duplicates: bool,
    /// What a restore into a changed job may do beyond keeping state: start new stateful
    /// operators empty, drop operators' state, give an operator's state to another id
    /// (docs/fault-tolerance.md, "Changing a job").
    pub evolution: weir_plan::evolution::EvolutionActions,
    /// Which engine holds keyed state; overrides the job's `state` section (`None`: the
    /// job's, else redb).
    pub state: Option<weir_plan::StateBackendSpec>,
}

/// What every attempt of one run of a job shares.
#[derive(Clone)]
pub(crate) struct RunContext {
    pub(crate) job: Arc<PreparedJob>,
    pub(crate) options: RunOptions,
    pub(crate) config: Option<CheckpointConfig>,
    pub(crate) metrics: Arc<JobMetrics>,
    pub(crate) summary: Option<SharedSummary>,
    /// Manual checkpoint requests; the coordinator of the running attempt holds the lock.
    pub(crate) requests: Arc<tokio::sync::Mutex<mpsc::Receiver<ManualCheckpoint>>>,
    /// Set by `RunningJob::kill`.
    pub(crate) killed: watch::Receiver<bool>,
}
