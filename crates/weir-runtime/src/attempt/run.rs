//! Step 7 of an attempt: run every task and the coordinator to the end. The first root-cause
//! failure stops the other tasks; a kill aborts them all.

use super::Attempt;
use crate::error::{Error, Result};
use std::collections::HashMap;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::Instrument;

impl Attempt {
    /// Runs every task and the coordinator to the end. The first root-cause error stops the
    /// other tasks; a bounded job with checkpoints succeeds only once its final epoch is
    /// committed.
    /// A kill (`killed` turns true) aborts every task and returns once they all stopped.
    pub(crate) async fn run(self, mut killed: watch::Receiver<bool>) -> Result<()> {
        let Attempt {
            tasks,
            coordinator,
            state_dir,
        } = self;
        let mut set = JoinSet::new();
        let mut labels = HashMap::new();
        for task in tasks {
            let label = task.label().to_owned();
            let handle = set.spawn(task.run());
            labels.insert(handle.id(), label);
        }
        let has_coordinator = coordinator.is_some();
        let coordinating = async move {
            match coordinator {
                Some(c) => {
                    let span = tracing::info_span!(
                        "checkpoints",
                        job = %c.job_id,
                        attempt = %c.attempt,
                    );
                    c.run().instrument(span).await
                }
                None => std::future::pending().await,
            }
        };
        tokio::pin!(coordinating);
        let mut coordinator_done = !has_coordinator;
        let mut first: Option<Error> = None;
        let mut kill_open = true;
        // Checked before every wait: a job whose every task never starts (a bounded source
        // without splits) has nothing to wait for but its coordinator.
        while !(set.is_empty() && (coordinator_done || first.is_some())) {
            tokio::select! {
                changed = killed.changed(), if kill_open => {
                    // A dropped `RunningJob` closes the channel: the job goes on unobserved.
                    if changed.is_err() {
                        kill_open = false;
                    } else if *killed.borrow() {
                        set.abort_all();
                        while set.join_next().await.is_some() {}
                        return Err(Error::Internal("the job was killed".into()));
                    }
                }
                joined = set.join_next(), if !set.is_empty() => {
                    let Some(joined) = joined else { continue };
                    let failure = match joined {
                        Ok(Ok(())) => None,
                        Ok(Err(e)) => Some(e),
                        Err(join) if join.is_cancelled() => None,
                        Err(join) => Some(Error::Panic {
                            task: labels.get(&join.id()).cloned().unwrap_or_default(),
                            message: panic_message(join),
                        }),
                    };
                    if let Some(e) = failure {
                        let replace = match &first {
                            None => true,
                            Some(f) => f.is_secondary() && !e.is_secondary(),
                        };
                        if first.is_none() {
                            // Stop every other task; their channel errors are secondary.
                            set.abort_all();
                        }
                        if replace {
                            first = Some(e);
                        }
                    }
                }
                result = &mut coordinating, if !coordinator_done => {
                    coordinator_done = true;
                    if let Err(e) = result
                        && first.is_none()
                    {
                        set.abort_all();
                        first = Some(e);
                    }
                }
            }
        }
        if state_dir.temporary
            && let Err(e) = std::fs::remove_dir_all(&state_dir.path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(dir = %state_dir.path.display(), error = %e, "removing the state directory failed");
        }
        match first {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// What a task that panicked said.
fn panic_message(join: tokio::task::JoinError) -> String {
    match join.try_into_panic() {
        Ok(payload) => payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "unknown panic".into()),
        Err(e) => e.to_string(),
    }
}
