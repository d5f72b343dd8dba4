//! One attempt of a job: a sequence of named steps, each in the module named after it
//! (docs/architecture.md, "The life of an attempt"):
//!
//! 1. [`fence`]: with checkpoints, fence older attempts, choose the epoch to restore and wire
//!    the coordinator's channels;
//! 2. [`channels`]: one bounded queue per channel of the plan;
//! 3. [`splits`]: assign each source's splits to its subtasks and find the tasks that never
//!    start (nothing to read, nothing to restore);
//! 4. [`restore`]: every task's state, restored from the epoch before any task runs;
//! 5. [`build`]: every task's chain of operators, its input gate and its edge writers;
//! 6. [`coordinate`]: the epoch coordinator of the attempt;
//! 7. [`run`]: every task and the coordinator, to the end or the first failure.
//!
//! Restarting after a failure is the executor's (`executor.rs`, `supervise`): it launches a
//! new attempt that restores the newest durable epoch.

mod build;
mod channels;
mod coordinate;
mod fence;
mod restore;
mod run;
mod splits;

use crate::checkpoint::RestoreFrom;
use crate::checkpoint::coordinator::Coordinator;
use crate::error::Result;
use crate::run_context::RunContext;
use crate::task::ChainTask;
use crate::task_state::StatePlacement;
use std::collections::HashMap;
use std::path::PathBuf;
use weir_api::{JobId, VertexId};
use weir_plan::StateBackendKind;

/// One task of an attempt, a subtask of a vertex: the key of the attempt's per-task data.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct TaskKey {
    pub(crate) vertex: VertexId,
    pub(crate) subtask: u32,
}

impl TaskKey {
    fn new(vertex: &VertexId, subtask: u32) -> Self {
        TaskKey {
            vertex: vertex.clone(),
            subtask,
        }
    }
}

/// Where the attempt's tasks keep their keyed-state files.
struct StateDir {
    path: PathBuf,
    /// A directory of this run alone, removed when the attempt ends: state outlives a run
    /// only through checkpoints.
    temporary: bool,
}

impl StateDir {
    /// Where the run's tasks keep keyed state: the run's override, else the job's `state`
    /// section, else redb files in this directory.
    fn placement(&self, run: &RunContext) -> Result<StatePlacement> {
        let (spec, origin) = match &run.options.state {
            Some(spec) => (spec.clone(), "--state-backend"),
            None => (
                run.job.plans.state.clone().unwrap_or_default(),
                run.job.file.as_str(),
            ),
        };
        spec.validate(origin)?;
        Ok(match (spec.backend, spec.redis) {
            (StateBackendKind::Redis, Some(redis)) => {
                let mut config = weir_state::RedisConfig::new(redis.url);
                if let Some(prefix) = redis.prefix {
                    config = config.with_prefix(prefix);
                }
                if let Some(password) = redis.password {
                    config = config.with_password(password);
                }
                StatePlacement::Redis(config)
            }
            _ => StatePlacement::Redb {
                dir: self.path.clone(),
                kept: !self.temporary,
            },
        })
    }

    /// The run's `state_dir`, or a fresh temporary directory named after the job and process.
    fn for_run(run: &RunContext, job_id: &JobId) -> StateDir {
        match &run.options.state_dir {
            Some(dir) => StateDir {
                path: dir.clone(),
                temporary: false,
            },
            None => {
                let nanos = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos());
                let name = format!("weir-state-{job_id}-{}-{nanos}", std::process::id());
                StateDir {
                    path: std::env::temp_dir().join(name),
                    temporary: true,
                }
            }
        }
    }
}

/// One run of the job's tasks (and coordinator), from a fresh start or a restore.
pub(crate) struct Attempt {
    tasks: Vec<ChainTask>,
    coordinator: Option<Coordinator>,
    state_dir: StateDir,
}

/// Creates the tasks of a new attempt: fences older attempts, restores, builds every task.
///
/// Boxed with an explicit `Send` bound: the supervisor calls it from a spawned task, and the
/// compiler cannot prove `Send` for the borrows inside an unboxed `async fn` there.
pub(crate) fn launch(
    run: &RunContext,
    restore: Option<RestoreFrom>,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Attempt>> + Send + '_>> {
    Box::pin(launch_steps(run, restore))
}

/// The steps of [`launch`], in order.
async fn launch_steps(run: &RunContext, restore: Option<RestoreFrom>) -> Result<Attempt> {
    let job = &run.job;
    let plan = job.partitioned();
    let state_dir = StateDir::for_run(run, &plan.job_id);
    let placement = state_dir.placement(run)?;
    let sinks = coordinate::epoch_sinks(job);

    let wiring = fence::begin(run, restore.as_ref(), &sinks).await?;
    let restore_plan = wiring.as_ref().and_then(|w| w.restore.as_ref());
    let mut channels = channels::Channels::open(plan, job.plans.deployment.channel_capacity);
    let splits = splits::SplitAssignment::of(job, restore_plan).await?;
    let to_restore = restore::segments_to_restore(plan, restore_plan)?;
    let never_started = splits.never_started(plan, &to_restore);
    let restored = restore::restore_tasks(
        plan,
        &placement,
        &never_started,
        to_restore,
        wiring.as_ref(),
    )
    .await?;

    let builder = build::TaskBuilder::new(run, &never_started, &splits, wiring.as_ref());
    let mut tasks = Vec::new();
    let mut states = restored.states;
    let mut images = restored.images;
    for vertex in &plan.vertices {
        for subtask in 0..vertex.parallelism {
            let key = TaskKey::new(&vertex.vertex_id, subtask);
            let Some(state) = states.remove(&key) else {
                continue; // never started
            };
            let images = images.remove(&key).unwrap_or_else(HashMap::new);
            tasks.push(
                builder
                    .build(&mut channels, vertex, subtask, state, images)
                    .await?,
            );
        }
    }
    // Every sender now lives in a task; dropping the leftovers (none) closes nothing early.
    drop(channels);

    let coordinator = wiring
        .map(|wiring| coordinate::coordinator(run, wiring, &never_started, &splits.listed, sinks));
    Ok(Attempt {
        tasks,
        coordinator,
        state_dir,
    })
}
