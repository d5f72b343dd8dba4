//! Agent reports (session sequence, generation fencing), job-level checkpoints and their
//! recovery records.

use super::jobs::{JobRow, enqueue, job_row, lanes, require_job, version_row};
use super::sessions::authenticate;
use super::{Store, from_stored, new_id, optional, rfc3339, to_i64, to_stored, to_u32, to_u64};
use crate::error::{HubError, Result};
use rusqlite::{Transaction, params};
use std::collections::BTreeMap;
use weir::plan::{CheckpointSpec, JobSpec};
use weir_control::{
    CheckpointAccepted, CheckpointKind, CommandAction, CommandOutcome, DesiredState,
    JobManifestBody, ObservedPhase, RecoveryRecord, ReportAck, ReportBatch, ReportItem,
};

/// A job-level checkpoint every lane reported: its manifest is to be written, then recorded
/// with [`Store::record_recovery`].
#[derive(Debug, Clone)]
pub struct PublishTask {
    /// The manifest's body.
    pub body: JobManifestBody,
    /// The checkpoint section of the version's spec: where the manifest goes.
    pub checkpoint: CheckpointSpec,
}

fn kind_from(s: &str) -> CheckpointKind {
    if s == "savepoint" {
        CheckpointKind::Savepoint
    } else {
        CheckpointKind::Checkpoint
    }
}

/// Applies one item of a report whose generation is the job's current one; `false` when the
/// item names something this Agent does not hold (refused).
fn apply_item(
    tx: &Transaction<'_>,
    agent_id: &str,
    job: &JobRow,
    item: &ReportItem,
    now: i64,
    publish: &mut Vec<PublishTask>,
) -> Result<bool> {
    let report = Applying {
        tx,
        agent_id,
        job,
        generation: to_i64(job.generation),
        now,
    };
    match item {
        ReportItem::CommandResult {
            command_id,
            outcome,
            ..
        } => report.command_result(command_id, outcome),
        ReportItem::LaneStatus {
            lane, state, cause, ..
        } => report.lane_status(*lane, state.as_str(), cause.as_deref()),
        ReportItem::LaneCheckpoint {
            checkpoint_id,
            lane,
            epoch,
            ..
        } => report.lane_checkpoint(checkpoint_id, *lane, *epoch, publish),
    }
}

/// The context "applying a report" errors carry.
const APPLYING: &str = "applying a report";

/// A checkpoint still pending, as [`Applying::pending_checkpoint`] reads it: its version,
/// kind, savepoint name, how many lanes must report it and when it was requested.
type Pending = (String, String, Option<String>, i64, i64);

/// The report being applied: its transaction, the Agent that sent it, the job at its current
/// generation and the time now.
struct Applying<'a, 'c> {
    tx: &'a Transaction<'c>,
    agent_id: &'a str,
    job: &'a JobRow,
    generation: i64,
    now: i64,
}

impl Applying<'_, '_> {
    /// A command's result: acknowledges the command sent to this Agent, then marks what its
    /// failure leaves failed (the lanes of a `run`, a pending checkpoint); `false` for a
    /// command the Agent was not sent.
    fn command_result(&self, command_id: &str, outcome: &CommandOutcome) -> Result<bool> {
        let (tx, job, generation, now) = (self.tx, self.job, self.generation, self.now);
        let action = optional(
            APPLYING,
            tx.query_row(
                "SELECT action FROM outbox WHERE command_id = ?1 AND agent_id = ?2 \
                 AND job_id = ?3 AND generation = ?4",
                params![command_id, self.agent_id, job.job_id, generation],
                |r| r.get::<_, String>(0),
            ),
        )?;
        let Some(action) = action else {
            return Ok(false);
        };
        tx.execute(
            "UPDATE outbox SET state = 'acked', acked_at = ?1, outcome = ?2 \
             WHERE command_id = ?3",
            params![now, to_stored("outcome", outcome)?, command_id],
        )
        .map_err(HubError::store(APPLYING))?;
        match (outcome, from_stored::<CommandAction>("command", &action)?) {
            (CommandOutcome::Failed { cause }, CommandAction::Run { lanes, .. }) => {
                for lane in lanes {
                    tx.execute(
                        "UPDATE assignments SET state = 'failed', cause = ?1, updated_at = ?2 \
                         WHERE job_id = ?3 AND generation = ?4 AND lane = ?5 AND agent_id = ?6",
                        params![cause, now, job.job_id, generation, lane, self.agent_id],
                    )
                    .map_err(HubError::store(APPLYING))?;
                }
            }
            // A lane that cannot take the checkpoint leaves it incomplete for good.
            (CommandOutcome::Failed { .. }, CommandAction::Checkpoint { checkpoint_id, .. }) => {
                tx.execute(
                    "UPDATE checkpoints SET state = 'abandoned' \
                     WHERE checkpoint_id = ?1 AND state = 'pending'",
                    [checkpoint_id],
                )
                .map_err(HubError::store(APPLYING))?;
            }
            _ => {}
        }
        Ok(true)
    }

    /// A lane's new state, recorded on the lane's assignment to this Agent; `false` when the
    /// Agent does not hold the lane.
    fn lane_status(&self, lane: u32, state: &str, cause: Option<&str>) -> Result<bool> {
        let changed = self
            .tx
            .execute(
                "UPDATE assignments SET state = ?1, cause = ?2, updated_at = ?3 \
                 WHERE job_id = ?4 AND generation = ?5 AND lane = ?6 AND agent_id = ?7",
                params![
                    state,
                    cause,
                    self.now,
                    self.job.job_id,
                    self.generation,
                    lane,
                    self.agent_id
                ],
            )
            .map_err(HubError::store(APPLYING))?;
        Ok(changed == 1)
    }

    /// A lane's durable epoch of a pending checkpoint: recorded, and when every lane has
    /// reported, the checkpoint queued for publishing; `false` when the Agent does not hold
    /// the lane or the checkpoint is not pending.
    fn lane_checkpoint(
        &self,
        checkpoint_id: &str,
        lane: u32,
        epoch: u64,
        publish: &mut Vec<PublishTask>,
    ) -> Result<bool> {
        let holds = self.holds_lane(lane)?;
        let checkpoint = self.pending_checkpoint(checkpoint_id)?;
        let (Some(()), Some(pending)) = (holds, checkpoint) else {
            return Ok(false);
        };
        self.tx
            .execute(
                "INSERT OR REPLACE INTO lane_checkpoints (checkpoint_id, lane, epoch, reported_at) \
                 VALUES (?1, ?2, ?3, ?4)",
                params![checkpoint_id, lane, to_i64(epoch), self.now],
            )
            .map_err(HubError::store(APPLYING))?;
        let lane_epochs = self.lane_epochs(checkpoint_id)?;
        let lane_count = pending.3;
        if lane_epochs.len() == usize::try_from(lane_count).unwrap_or(usize::MAX) {
            self.publish_checkpoint(checkpoint_id, pending, lane_epochs, publish)?;
        }
        Ok(true)
    }

    /// Whether this Agent holds `lane` of the job's current generation (`Some(())` if so).
    fn holds_lane(&self, lane: u32) -> Result<Option<()>> {
        optional(
            APPLYING,
            self.tx.query_row(
                "SELECT 1 FROM assignments WHERE job_id = ?1 AND generation = ?2 \
                 AND lane = ?3 AND agent_id = ?4",
                params![self.job.job_id, self.generation, lane, self.agent_id],
                |_| Ok(()),
            ),
        )
    }

    /// Checkpoint `checkpoint_id` of the job's current generation, if it is still pending.
    fn pending_checkpoint(&self, checkpoint_id: &str) -> Result<Option<Pending>> {
        optional(
            APPLYING,
            self.tx.query_row(
                "SELECT version_id, kind, savepoint_name, lanes, created_at FROM checkpoints \
                 WHERE checkpoint_id = ?1 AND job_id = ?2 AND generation = ?3 \
                 AND state = 'pending'",
                params![checkpoint_id, self.job.job_id, self.generation],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, Option<String>>(2)?,
                        r.get::<_, i64>(3)?,
                        r.get::<_, i64>(4)?,
                    ))
                },
            ),
        )
    }

    /// The durable epoch every lane reported so far for `checkpoint_id`, by lane.
    fn lane_epochs(&self, checkpoint_id: &str) -> Result<BTreeMap<u32, u64>> {
        let mut stmt = self
            .tx
            .prepare_cached("SELECT lane, epoch FROM lane_checkpoints WHERE checkpoint_id = ?1")
            .map_err(HubError::store(APPLYING))?;
        Ok(stmt
            .query_map([checkpoint_id], |r| {
                Ok((r.get::<_, u32>(0)?, r.get::<_, i64>(1)?))
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(HubError::store(APPLYING))?
            .into_iter()
            .map(|(l, e)| (l, to_u64(e)))
            .collect())
    }

    /// Marks checkpoint `checkpoint_id`, which every lane reported, as publishing and queues
    /// its manifest, when its version's spec says where manifests go.
    fn publish_checkpoint(
        &self,
        checkpoint_id: &str,
        (version_id, kind, savepoint_name, _, created): Pending,
        lane_epochs: BTreeMap<u32, u64>,
        publish: &mut Vec<PublishTask>,
    ) -> Result<()> {
        self.tx
            .execute(
                "UPDATE checkpoints SET state = 'publishing' WHERE checkpoint_id = ?1",
                [checkpoint_id],
            )
            .map_err(HubError::store(APPLYING))?;
        let version = version_row(self.tx, &version_id)?;
        let spec: JobSpec = from_stored("job spec", &version.spec_text())?;
        let Some(checkpoint) = spec.checkpoint else {
            return Ok(());
        };
        publish.push(PublishTask {
            body: JobManifestBody {
                job_id: self.job.job_id.clone(),
                version_id,
                generation: self.job.generation,
                state_format_version: version.version.state_format_version,
                checkpoint_id: checkpoint_id.to_owned(),
                kind: kind_from(&kind),
                savepoint_name,
                lane_epochs,
                created_at: rfc3339(created),
                completed_at: rfc3339(self.now),
            },
            checkpoint,
        });
        Ok(())
    }
}

impl super::jobs::VersionRow {
    /// The version's compiled spec as stored JSON.
    fn spec_text(&self) -> String {
        self.version.spec.to_string()
    }
}

/// Queues `checkpoint` commands for every Agent holding a lane of the job's current generation.
fn request(
    tx: &Transaction<'_>,
    job: &JobRow,
    kind: CheckpointKind,
    name: Option<&str>,
    now: i64,
) -> Result<CheckpointAccepted> {
    let context = "requesting a checkpoint";
    if job.desired != DesiredState::Running {
        return Err(HubError::conflict(
            "desiredState",
            format!("job `{}` is not running", job.job_id),
        ));
    }
    let lanes_now = lanes(tx, job)?;
    if lanes_now.is_empty()
        || lanes_now
            .iter()
            .any(|l| l.agent_id.is_none() || l.state == "lost")
    {
        return Err(HubError::conflict(
            "desiredState",
            format!("job `{}` has lanes waiting for an Agent", job.job_id),
        ));
    }
    let checkpoint_id = new_id();
    let savepoint = match kind {
        CheckpointKind::Savepoint => {
            Some(name.map_or_else(|| checkpoint_id.clone(), str::to_owned))
        }
        CheckpointKind::Checkpoint => None,
    };
    tx.execute(
        "INSERT INTO checkpoints (checkpoint_id, job_id, version_id, generation, kind, \
         savepoint_name, lanes, state, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'pending', ?8)",
        params![
            checkpoint_id,
            job.job_id,
            job.current_version,
            to_i64(job.generation),
            kind.as_str(),
            savepoint,
            i64::try_from(lanes_now.len()).unwrap_or(i64::MAX),
            now
        ],
    )
    .and_then(|_| {
        tx.execute(
            "UPDATE jobs SET last_checkpoint_at = ?1 WHERE job_id = ?2",
            params![now, job.job_id],
        )
    })
    .map_err(HubError::store(context))?;
    let mut agents: Vec<&str> = lanes_now
        .iter()
        .filter_map(|l| l.agent_id.as_deref())
        .collect();
    agents.sort_unstable();
    agents.dedup();
    let action = CommandAction::Checkpoint {
        checkpoint_id: checkpoint_id.clone(),
        savepoint,
    };
    for agent in agents {
        enqueue(tx, agent, job, &job.current_version, &action, now)?;
    }
    Ok(CheckpointAccepted {
        checkpoint_id,
        kind,
        generation: job.generation,
        lanes: to_u32(i64::try_from(lanes_now.len()).unwrap_or(0)),
    })
}

/// Completed job-level checkpoints of a job, newest first.
pub(crate) fn recovery_records(tx: &Transaction<'_>, job_id: &str) -> Result<Vec<RecoveryRecord>> {
    let context = "reading recovery records";
    let mut stmt = tx
        .prepare_cached(
            "SELECT checkpoint_id, kind, savepoint_name, version_id, generation, \
             state_format_version, lane_epochs, manifest_path, checksum, created_at, completed_at \
             FROM recovery_records WHERE job_id = ?1 ORDER BY completed_at DESC, rowid DESC",
        )
        .map_err(HubError::store(context))?;
    let rows = stmt
        .query_map([job_id], |r| {
            Ok((
                (
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, Option<String>>(2)?,
                ),
                (
                    r.get::<_, String>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, i64>(5)?,
                ),
                (
                    r.get::<_, String>(6)?,
                    r.get::<_, String>(7)?,
                    r.get::<_, String>(8)?,
                ),
                (r.get::<_, i64>(9)?, r.get::<_, i64>(10)?),
            ))
        })
        .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
        .map_err(HubError::store(context))?;
    rows.into_iter()
        .map(
            |((id, kind, name), (version, generation, sfv), (epochs, path, sum), (c, d))| {
                Ok(RecoveryRecord {
                    checkpoint_id: id,
                    kind: kind_from(&kind),
                    savepoint_name: name,
                    version_id: version,
                    generation: to_u64(generation),
                    state_format_version: to_u32(sfv),
                    lane_epochs: from_stored("lane epochs", &epochs)?,
                    manifest_path: path,
                    checksum: sum,
                    created_at: rfc3339(c),
                    completed_at: rfc3339(d),
                })
            },
        )
        .collect()
}

/// Abandons the job-level checkpoints still pending (or publishing, when the Hub stopped between
/// writing and recording) after their job's `checkpoint.timeout` (default 10 minutes): a lane
/// that never reports must not block the periodic ones.
fn abandon_timed_out(tx: &Transaction<'_>, now: i64) -> Result<()> {
    let context = "abandoning timed-out checkpoints";
    let pending = {
        let mut stmt = tx
            .prepare_cached(
                "SELECT checkpoint_id, version_id, created_at FROM checkpoints \
                 WHERE state IN ('pending', 'publishing')",
            )
            .map_err(HubError::store(context))?;
        stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
            ))
        })
        .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
        .map_err(HubError::store(context))?
    };
    for (checkpoint_id, version_id, created) in pending {
        let spec: JobSpec = from_stored("job spec", &version_row(tx, &version_id)?.spec_text())?;
        let timeout = spec
            .checkpoint
            .and_then(|c| c.timeout)
            .unwrap_or(weir::plan::DEFAULT_CHECKPOINT_TIMEOUT)
            .as_i64();
        if now - created > timeout {
            tx.execute(
                "UPDATE checkpoints SET state = 'abandoned' WHERE checkpoint_id = ?1",
                [&checkpoint_id],
            )
            .map_err(HubError::store(context))?;
        }
    }
    Ok(())
}

impl Store {
    /// Completed job-level checkpoints and savepoints of `job_id`, newest first, with the
    /// job's current generation.
    ///
    /// # Errors
    /// 404 for an unknown job.
    pub fn recovery_records(&self, job_id: &str) -> Result<(u64, Vec<RecoveryRecord>)> {
        self.read("reading recovery records", |tx| {
            let job = super::jobs::require_job(tx, job_id)?;
            Ok((job.generation, recovery_records(tx, job_id)?))
        })
    }

    /// The spec of version `version_id` (of the job's current version when `None`), with the
    /// job's current generation.
    ///
    /// # Errors
    /// 404 for an unknown job or version.
    pub fn version_spec(&self, job_id: &str, version_id: Option<&str>) -> Result<(u64, JobSpec)> {
        self.read("reading a version's spec", |tx| {
            let job = super::jobs::require_job(tx, job_id)?;
            let version = version_row(tx, version_id.unwrap_or(&job.current_version))?;
            if version.version.job_id != job_id {
                return Err(HubError::not_found(
                    "version",
                    &version.version.version_id,
                    "versionId",
                ));
            }
            let spec: JobSpec = from_stored("job spec", &version.spec_text())?;
            Ok((job.generation, spec))
        })
    }

    /// Applies a report of Agent `agent_id`'s session `token`: refused whole (409) for an old
    /// session or a `seq` that is not the next one, with nothing changed but a counter; items
    /// about an older generation are refused one by one (counted, ignored). Returns the answer
    /// and the job manifests to publish.
    ///
    /// # Errors
    /// 404 for an unknown Agent; 409 naming `Authorization`, `sessionId` or `seq`.
    pub fn apply_report(
        &self,
        agent_id: &str,
        token: &str,
        batch: &ReportBatch,
        now: i64,
    ) -> Result<(ReportAck, Vec<PublishTask>)> {
        self.write_always("applying a report", |tx| {
            let context = "applying a report";
            let refuse =
                |tx: &Transaction<'_>, error: HubError| -> Result<(ReportAck, Vec<PublishTask>)> {
                    tx.execute(
                    "UPDATE agents SET refused_reports = refused_reports + 1 WHERE agent_id = ?1",
                    [agent_id],
                )
                .map_err(HubError::store(context))?;
                    Err(error)
                };
            let session = match authenticate(tx, agent_id, token) {
                Ok(s) => s,
                Err(e @ HubError::Conflict { .. }) => return refuse(tx, e),
                Err(e) => return Err(e),
            };
            if batch.session_id != session.session_id {
                return refuse(
                    tx,
                    HubError::conflict(
                        "sessionId",
                        format!(
                            "stale session `{}`: Agent `{agent_id}`'s session is `{}`",
                            batch.session_id, session.session_id
                        ),
                    ),
                );
            }
            let last: Option<i64> = tx
                .query_row(
                    "SELECT last_seq FROM agent_sessions WHERE session_id = ?1",
                    [&session.session_id],
                    |r| r.get(0),
                )
                .map_err(HubError::store(context))?;
            let expected = last.map_or(0, |s| to_u64(s) + 1);
            if batch.seq != expected {
                return refuse(
                    tx,
                    HubError::conflict(
                        "seq",
                        format!(
                            "report seq {} is not the next one: expected {expected}",
                            batch.seq
                        ),
                    ),
                );
            }
            let mut accepted = 0u32;
            let mut refused = 0u32;
            let mut publish = Vec::new();
            for item in &batch.reports {
                let applied = match job_row(tx, item.job_id())? {
                    Some(job) if job.generation == item.generation() => {
                        apply_item(tx, agent_id, &job, item, now, &mut publish)?
                    }
                    _ => false,
                };
                if applied {
                    accepted += 1;
                } else {
                    refused += 1;
                }
            }
            tx.execute(
                "UPDATE agent_sessions SET last_seq = ?1 WHERE session_id = ?2",
                params![to_i64(batch.seq), session.session_id],
            )
            .and_then(|_| {
                tx.execute(
                    "UPDATE agents SET refused_report_items = refused_report_items + ?1 \
                     WHERE agent_id = ?2",
                    params![refused, agent_id],
                )
            })
            .map_err(HubError::store(context))?;
            Ok((
                ReportAck {
                    seq: batch.seq,
                    accepted,
                    refused,
                },
                publish,
            ))
        })
    }

    /// Asks every Agent holding a lane of the job for a job-level checkpoint or savepoint.
    ///
    /// # Errors
    /// 404 for an unknown job; 409 naming `desiredState` when the job is not running on placed
    /// lanes.
    pub fn request_checkpoint(
        &self,
        job_id: &str,
        kind: CheckpointKind,
        name: Option<&str>,
        now: i64,
    ) -> Result<CheckpointAccepted> {
        self.write("requesting a checkpoint", |tx| {
            let job = require_job(tx, job_id)?;
            request(tx, &job, kind, name, now)
        })
    }

    /// Records the manifest of a published job-level checkpoint as a recovery record.
    ///
    /// # Errors
    /// [`HubError::Store`].
    pub fn record_recovery(
        &self,
        task: &PublishTask,
        manifest_path: &str,
        checksum: &str,
    ) -> Result<()> {
        self.write("recording a recovery record", |tx| {
            let b = &task.body;
            tx.execute(
                "INSERT INTO recovery_records (checkpoint_id, job_id, version_id, generation, kind, \
                 savepoint_name, state_format_version, lane_epochs, manifest_path, checksum, \
                 created_at, completed_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, \
                 (SELECT created_at FROM checkpoints WHERE checkpoint_id = ?1), ?11)",
                params![
                    b.checkpoint_id,
                    b.job_id,
                    b.version_id,
                    to_i64(b.generation),
                    b.kind.as_str(),
                    b.savepoint_name,
                    b.state_format_version,
                    to_stored("lane epochs", &b.lane_epochs)?,
                    manifest_path,
                    checksum,
                    super::now_ms(),
                ],
            )
            .and_then(|_| {
                tx.execute(
                    "UPDATE checkpoints SET state = 'completed' WHERE checkpoint_id = ?1",
                    [&b.checkpoint_id],
                )
            })
            .map_err(HubError::store("recording a recovery record"))?;
            Ok(())
        })
    }

    /// Marks a checkpoint whose manifest could not be written as abandoned: the previous
    /// recovery record stays the valid one.
    ///
    /// # Errors
    /// [`HubError::Store`].
    pub fn abandon_checkpoint(&self, checkpoint_id: &str) -> Result<()> {
        self.write("abandoning a checkpoint", |tx| {
            tx.execute(
                "UPDATE checkpoints SET state = 'abandoned' WHERE checkpoint_id = ?1",
                [checkpoint_id],
            )
            .map_err(HubError::store("abandoning a checkpoint"))?;
            Ok(())
        })
    }

    /// Requests the periodic job-level checkpoints that are due: running jobs whose lanes all
    /// run, whose checkpoint interval passed since the last request, with none in flight
    /// (pending ones older than the job's `checkpoint.timeout` are abandoned first).
    ///
    /// # Errors
    /// [`HubError::Store`].
    pub fn request_due_checkpoints(&self, now: i64) -> Result<Vec<CheckpointAccepted>> {
        self.write("requesting periodic checkpoints", |tx| {
            let context = "requesting periodic checkpoints";
            abandon_timed_out(tx, now)?;
            let ids = {
                let mut stmt = tx
                    .prepare_cached(
                        "SELECT job_id FROM jobs j WHERE desired_state = 'running' AND NOT EXISTS \
                         (SELECT 1 FROM checkpoints c WHERE c.job_id = j.job_id \
                          AND c.generation = j.generation AND c.state IN ('pending', 'publishing')) \
                         ORDER BY job_id",
                    )
                    .map_err(HubError::store(context))?;
                stmt.query_map([], |r| r.get::<_, String>(0))
                    .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
                    .map_err(HubError::store(context))?
            };
            let mut requested = Vec::new();
            for id in ids {
                let job = require_job(tx, &id)?;
                let spec: JobSpec =
                    from_stored("job spec", &version_row(tx, &job.current_version)?.spec_text())?;
                let Some(interval) = spec.checkpoint.map(|c| c.interval.as_i64()) else {
                    continue;
                };
                let phase = super::super::observed::aggregate(job.desired, &lanes(tx, &job)?).phase;
                if phase == ObservedPhase::Running && now - job.last_checkpoint_at >= interval {
                    requested.push(request(tx, &job, CheckpointKind::Checkpoint, None, now)?);
                }
            }
            Ok(requested)
        })
    }
}
