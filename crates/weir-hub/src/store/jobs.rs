//! Jobs, versions, desired state, generations, assignments and placement.

use super::{Store, from_stored, optional, rfc3339, to_i64, to_stored, to_u32, to_u64};
use crate::compile::Compiled;
use crate::error::{HubError, Result};
use crate::observed::{LaneView, aggregate};
use crate::placement::{Candidates, JobNeeds, LiveAgent, candidates, place};
use rusqlite::{Transaction, params};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use weir::plan::StateBackendKind;
use weir_control::{
    AgentCapabilities, CommandAction, DesiredState, DesiredStateChange, JobSummary, JobVersion,
    LANE_HISTORY, LaneRecord, Restore, StateActions,
};

/// A row of `jobs`.
#[derive(Debug, Clone)]
pub(crate) struct JobRow {
    pub job_id: String,
    pub desired: DesiredState,
    pub generation: u64,
    pub current_version: String,
    pub has_run: bool,
    pub restore_epochs: Option<BTreeMap<u32, u64>>,
    pub generation_restore: Restore,
    pub last_checkpoint_at: i64,
    pub created_at: i64,
}

/// A row of `job_versions`.
#[derive(Debug, Clone)]
pub(crate) struct VersionRow {
    pub version: JobVersion,
    pub plans_json: String,
    /// Its operators' profiles; `None` for a version stored before they were recorded.
    pub profiles: Option<Vec<weir::plan::evolution::OperatorProfile>>,
    /// The actions its restore of an older version's savepoint takes.
    pub actions: StateActions,
}

fn desired_from(s: &str) -> DesiredState {
    if s == "running" {
        DesiredState::Running
    } else {
        DesiredState::Stopped
    }
}

/// Lane states that hold no slot.
const INACTIVE: &str = "('stopped', 'finished', 'failed', 'lost')";

pub(crate) fn job_row(tx: &Transaction<'_>, job_id: &str) -> Result<Option<JobRow>> {
    let context = "reading a job";
    let row = optional(
        context,
        tx.query_row(
            "SELECT job_id, desired_state, generation, current_version, has_run, \
             restore_epochs, generation_restore, last_checkpoint_at, created_at \
             FROM jobs WHERE job_id = ?1",
            [job_id],
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, Option<String>>(5)?,
                    r.get::<_, String>(6)?,
                    r.get::<_, i64>(7)?,
                    r.get::<_, i64>(8)?,
                ))
            },
        ),
    )?;
    let Some((job_id, desired, generation, version, has_run, epochs, restore, last_cp, created)) =
        row
    else {
        return Ok(None);
    };
    Ok(Some(JobRow {
        job_id,
        desired: desired_from(&desired),
        generation: to_u64(generation),
        current_version: version,
        has_run: has_run != 0,
        restore_epochs: epochs
            .map(|e| from_stored("restore epochs", &e))
            .transpose()?,
        generation_restore: from_stored("generation restore", &restore)?,
        last_checkpoint_at: last_cp,
        created_at: created,
    }))
}

/// The job, or a 404 naming `jobId`.
pub(crate) fn require_job(tx: &Transaction<'_>, job_id: &str) -> Result<JobRow> {
    job_row(tx, job_id)?.ok_or_else(|| HubError::not_found("job", job_id, "jobId"))
}

pub(crate) fn version_row(tx: &Transaction<'_>, version_id: &str) -> Result<VersionRow> {
    let context = "reading a job version";
    let row = tx
        .query_row(
            "SELECT version_id, job_id, number, source_sql, spec_json, plan_fingerprint, \
             state_format_version, lanes, created_at, plans_json, operator_profiles, \
             state_actions FROM job_versions WHERE version_id = ?1",
            [version_id],
            |r| {
                Ok((
                    JobVersionRaw {
                        version_id: r.get(0)?,
                        job_id: r.get(1)?,
                        number: r.get(2)?,
                        sql: r.get(3)?,
                        spec: r.get(4)?,
                        plan_fingerprint: r.get(5)?,
                        state_format_version: r.get(6)?,
                        lanes: r.get(7)?,
                        created_at: r.get(8)?,
                    },
                    r.get::<_, String>(9)?,
                    r.get::<_, Option<String>>(10)?,
                    r.get::<_, Option<String>>(11)?,
                ))
            },
        )
        .map_err(HubError::store(context))?;
    Ok(VersionRow {
        version: row.0.into_version()?,
        plans_json: row.1,
        profiles: row
            .2
            .map(|p| from_stored("operator profiles", &p))
            .transpose()?,
        actions: row
            .3
            .map(|a| from_stored("state actions", &a))
            .transpose()?
            .unwrap_or_default(),
    })
}

struct JobVersionRaw {
    version_id: String,
    job_id: String,
    number: i64,
    sql: Option<String>,
    spec: String,
    plan_fingerprint: String,
    state_format_version: i64,
    lanes: i64,
    created_at: i64,
}

impl JobVersionRaw {
    fn into_version(self) -> Result<JobVersion> {
        Ok(JobVersion {
            version_id: self.version_id,
            job_id: self.job_id,
            number: to_u32(self.number),
            sql: self.sql,
            spec: from_stored("job spec", &self.spec)?,
            plan_fingerprint: self.plan_fingerprint,
            state_format_version: to_u32(self.state_format_version),
            lanes: to_u32(self.lanes),
            created_at: rfc3339(self.created_at),
        })
    }
}

/// Inserts a new immutable version of `job_id`; returns its id.
pub(crate) fn insert_version(
    tx: &Transaction<'_>,
    job_id: &str,
    compiled: &Compiled,
    sql: Option<&str>,
    spec: Option<&serde_json::Value>,
    actions: &StateActions,
    now: i64,
) -> Result<String> {
    let context = "storing a job version";
    let number: i64 = tx
        .query_row(
            "SELECT COALESCE(MAX(number), 0) + 1 FROM job_versions WHERE job_id = ?1",
            [job_id],
            |r| r.get(0),
        )
        .map_err(HubError::store(context))?;
    let version_id = format!("{job_id}-v{number}");
    let source_spec = spec.map(|s| to_stored("job spec", s)).transpose()?;
    tx.execute(
        "INSERT INTO job_versions (version_id, job_id, number, source_sql, source_spec, \
         spec_json, plans_json, plan_fingerprint, state_format_version, lanes, created_at, \
         touches, operator_profiles, state_actions) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
        params![
            version_id,
            job_id,
            number,
            sql,
            source_spec,
            to_stored("job spec", &compiled.spec)?,
            to_stored("plans", &compiled.plans_json)?,
            compiled.plan_fingerprint,
            weir::state::STATE_FORMAT_VERSION,
            compiled.lanes,
            now,
            to_stored(
                "touched places",
                &crate::compile::places_of(&compiled.touches)
            )?,
            to_stored("operator profiles", &compiled.profiles)?,
            (!actions.is_empty())
                .then(|| to_stored("state actions", actions))
                .transpose()?,
        ],
    )
    .map_err(HubError::store(context))?;
    Ok(version_id)
}

/// The lanes of a job's current generation.
pub(crate) fn lanes(tx: &Transaction<'_>, job: &JobRow) -> Result<Vec<LaneView>> {
    let context = "reading assignments";
    let mut stmt = tx
        .prepare_cached(
            "SELECT lane, agent_id, state, cause FROM assignments \
             WHERE job_id = ?1 AND generation = ?2 ORDER BY lane",
        )
        .map_err(HubError::store(context))?;
    let rows = stmt
        .query_map(params![job.job_id, to_i64(job.generation)], |r| {
            Ok(LaneView {
                lane: r.get(0)?,
                agent_id: r.get(1)?,
                state: r.get(2)?,
                cause: r.get(3)?,
            })
        })
        .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
        .map_err(HubError::store(context))?;
    Ok(rows)
}

/// When the Hub first queued a command of the job's current generation, if it should run: the
/// start of its current run.
fn running_since(tx: &Transaction<'_>, job: &JobRow) -> Result<Option<String>> {
    if job.desired != DesiredState::Running {
        return Ok(None);
    }
    let context = "reading when a job started";
    let first: Option<i64> = tx
        .prepare_cached("SELECT MIN(created_at) FROM outbox WHERE job_id = ?1 AND generation = ?2")
        .and_then(|mut stmt| {
            stmt.query_row(params![job.job_id, to_i64(job.generation)], |r| r.get(0))
        })
        .map_err(HubError::store(context))?;
    Ok(first.map(rfc3339))
}

/// The lanes of the job's newest generations, newest first (at most [`LANE_HISTORY`]).
pub(crate) fn lane_history(tx: &Transaction<'_>, job_id: &str) -> Result<Vec<LaneRecord>> {
    let context = "reading the lane history";
    let mut stmt = tx
        .prepare_cached(
            "SELECT generation, lane, agent_id, state, cause, updated_at FROM assignments \
             WHERE job_id = ?1 ORDER BY generation DESC, lane LIMIT ?2",
        )
        .map_err(HubError::store(context))?;
    stmt.query_map(params![job_id, to_i64(LANE_HISTORY as u64)], |r| {
        Ok(LaneRecord {
            generation: to_u64(r.get(0)?),
            lane: r.get(1)?,
            agent_id: r.get(2)?,
            state: r.get(3)?,
            cause: r.get(4)?,
            updated_at: rfc3339(r.get(5)?),
        })
    })
    .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
    .map_err(HubError::store(context))
}

pub(crate) fn summary(tx: &Transaction<'_>, job: &JobRow) -> Result<JobSummary> {
    let lanes_now = lanes(tx, job)?;
    let version = version_row(tx, &job.current_version)?;
    Ok(JobSummary {
        job_id: job.job_id.clone(),
        desired_state: job.desired,
        generation: job.generation,
        current_version: job.current_version.clone(),
        lanes: version.version.lanes,
        observed: aggregate(job.desired, &lanes_now),
        created_at: rfc3339(job.created_at),
        running_since: running_since(tx, job)?,
    })
}

/// The live Agents that can run `job`'s lanes, with what they run (current generations of
/// running jobs, lanes that hold a slot): compatible, offering the state backend of the job's
/// current version, and with allow-lists (if any) that take every place it touches; and why
/// a lane that finds no slot among them waits.
fn agent_loads(tx: &Transaction<'_>, job: &JobRow) -> Result<Candidates> {
    let context = "reading agent loads";
    // The backend is in the stored spec (absent: redb); a version's spec never changes.
    let (places, backend): (String, Option<String>) = tx
        .query_row(
            "SELECT touches, json_extract(spec_json, '$.state.backend') FROM job_versions \
             WHERE version_id = ?1",
            [&job.current_version],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(HubError::store(context))?;
    let touches = crate::compile::touches_of(&from_stored("touched places", &places)?);
    let state_backend = match backend.as_deref() {
        None => StateBackendKind::Redb,
        Some(name) => StateBackendKind::parse(name).ok_or_else(|| HubError::Store {
            context: format!(
                "job version `{}` keeps its state in `{name}`, a backend this Hub does not know",
                job.current_version
            ),
            source: rusqlite::Error::InvalidQuery,
        })?,
    };
    let mut stmt = tx
        .prepare_cached(
            "SELECT agent_id, capabilities FROM agents WHERE state = 'live' ORDER BY agent_id",
        )
        .map_err(HubError::store(context))?;
    let agents = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
        .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
        .map_err(HubError::store(context))?;
    let mut stmt = tx
        .prepare_cached(&format!(
            "SELECT a.agent_id, COUNT(*) FROM assignments a JOIN jobs j \
             ON a.job_id = j.job_id AND a.generation = j.generation \
             WHERE a.agent_id IS NOT NULL AND j.desired_state = 'running' \
             AND a.state NOT IN {INACTIVE} GROUP BY a.agent_id"
        ))
        .map_err(HubError::store(context))?;
    let held: HashMap<String, i64> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .and_then(|rows| rows.collect::<rusqlite::Result<HashMap<_, _>>>())
        .map_err(HubError::store(context))?;
    let live = agents
        .into_iter()
        .map(|(agent_id, caps)| {
            Ok(LiveAgent {
                capabilities: from_stored::<AgentCapabilities>("agent capabilities", &caps)?,
                lanes: held.get(&agent_id).copied().map_or(0, to_u32),
                agent_id,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(candidates(
        live,
        JobNeeds {
            state_backend,
            touches: &touches,
        },
    ))
}

/// Queues a command for `agent_id`.
pub(crate) fn enqueue(
    tx: &Transaction<'_>,
    agent_id: &str,
    job: &JobRow,
    version_id: &str,
    action: &CommandAction,
    now: i64,
) -> Result<String> {
    let command_id = super::new_id();
    tx.execute(
        "INSERT INTO outbox (command_id, agent_id, job_id, version_id, generation, action, \
         state, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', ?7)",
        params![
            command_id,
            agent_id,
            job.job_id,
            version_id,
            to_i64(job.generation),
            to_stored("command", action)?,
            now
        ],
    )
    .map_err(HubError::store("queueing a command"))?;
    Ok(command_id)
}

/// Sends `run` for the given lane placement, grouped by Agent.
fn send_runs(
    tx: &Transaction<'_>,
    job: &JobRow,
    placed: &[(u32, Option<String>)],
    now: i64,
) -> Result<()> {
    let version = version_row(tx, &job.current_version)?;
    let mut by_agent: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for (lane, agent) in placed {
        if let Some(agent) = agent {
            by_agent.entry(agent).or_default().push(*lane);
        }
    }
    for (agent, lanes) in by_agent {
        tracing::info!(job = %job.job_id, agent, ?lanes, generation = job.generation, "lanes placed");
        let action = CommandAction::Run {
            lanes,
            lane_count: version.version.lanes,
            spec: version.version.spec.clone(),
            restore: job.generation_restore.clone(),
            actions: version.actions.clone(),
        };
        enqueue(tx, agent, job, &job.current_version, &action, now)?;
    }
    Ok(())
}

fn insert_assignment(
    tx: &Transaction<'_>,
    job: &JobRow,
    lane: u32,
    agent: Option<&str>,
    state: &str,
    cause: Option<&str>,
    now: i64,
) -> Result<()> {
    tx.execute(
        "INSERT INTO assignments (job_id, generation, lane, agent_id, state, cause, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            job.job_id,
            to_i64(job.generation),
            lane,
            agent,
            state,
            cause,
            now
        ],
    )
    .map_err(HubError::store("storing an assignment"))?;
    Ok(())
}

/// Inserts the assignments of a placement: placed lanes pending on their Agent, the others
/// waiting for one with `wait_cause`.
fn insert_placed(
    tx: &Transaction<'_>,
    job: &JobRow,
    placed: &[(u32, Option<String>)],
    wait_cause: &str,
    now: i64,
) -> Result<()> {
    for (lane, agent) in placed {
        let cause = agent.is_none().then_some(wait_cause);
        insert_assignment(tx, job, *lane, agent.as_deref(), "pending", cause, now)?;
    }
    Ok(())
}

/// Moves `job` to the next generation with `desired` and `restore`: older commands are
/// superseded and unfinished job-level checkpoints abandoned. Fails with 409 when another
/// writer moved the generation first.
fn bump_generation(
    tx: &Transaction<'_>,
    job: &mut JobRow,
    desired: DesiredState,
    restore: Restore,
) -> Result<()> {
    let context = "changing a job's generation";
    let next = job.generation + 1;
    let changed = tx
        .execute(
            "UPDATE jobs SET desired_state = ?1, generation = ?2, generation_restore = ?3 \
             WHERE job_id = ?4 AND generation = ?5",
            params![
                desired.as_str(),
                to_i64(next),
                to_stored("restore", &restore)?,
                job.job_id,
                to_i64(job.generation)
            ],
        )
        .map_err(HubError::store(context))?;
    if changed != 1 {
        return Err(HubError::conflict(
            "generation",
            format!(
                "job `{}` moved past generation {}",
                job.job_id, job.generation
            ),
        ));
    }
    tx.execute(
        "UPDATE outbox SET state = 'superseded' WHERE job_id = ?1 AND generation < ?2 \
         AND state IN ('pending', 'claimed')",
        params![job.job_id, to_i64(next)],
    )
    .and_then(|_| {
        tx.execute(
            "UPDATE checkpoints SET state = 'abandoned' WHERE job_id = ?1 AND generation < ?2 \
             AND state = 'pending'",
            params![job.job_id, to_i64(next)],
        )
    })
    .map_err(HubError::store(context))?;
    job.generation = next;
    job.desired = desired;
    job.generation_restore = restore;
    Ok(())
}

/// Starts every lane of `job` in a new generation: placed afresh, `run` commands queued.
fn start(tx: &Transaction<'_>, job: &mut JobRow, now: i64) -> Result<()> {
    let restore = match job.restore_epochs.take() {
        Some(epochs) => Restore::LaneEpochs(epochs),
        None if job.has_run => Restore::Latest,
        None => Restore::None,
    };
    bump_generation(tx, job, DesiredState::Running, restore)?;
    tx.execute(
        "UPDATE jobs SET has_run = 1, restore_epochs = NULL WHERE job_id = ?1",
        [&job.job_id],
    )
    .map_err(HubError::store("starting a job"))?;
    job.has_run = true;
    let lanes = version_row(tx, &job.current_version)?.version.lanes;
    let mut candidates = agent_loads(tx, job)?;
    let placed = place(&(0..lanes).collect::<Vec<_>>(), &mut candidates.loads);
    insert_placed(tx, job, &placed, &candidates.wait_cause, now)?;
    send_runs(tx, job, &placed, now)
}

/// Stops every lane of `job` in a new generation: `stop` commands to the live Agents that hold
/// lanes; lanes on no live Agent are stopped at once.
fn stop(tx: &Transaction<'_>, job: &mut JobRow, now: i64) -> Result<()> {
    let before = lanes(tx, job)?;
    let live = live_agents(tx)?;
    let restore = job.generation_restore.clone();
    bump_generation(tx, job, DesiredState::Stopped, restore)?;
    let mut by_agent: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for lane in before {
        let active = !matches!(
            lane.state.as_str(),
            "stopped" | "finished" | "failed" | "lost"
        );
        match lane.agent_id {
            Some(agent) if active && live.contains(&agent) => {
                insert_assignment(tx, job, lane.lane, Some(&agent), "pending", None, now)?;
                by_agent.entry(agent).or_default().push(lane.lane);
            }
            agent => {
                let state = if lane.state == "finished" {
                    "finished"
                } else {
                    "stopped"
                };
                // A lane that waited for an Agent stops without its wait cause.
                let cause = agent.as_ref().and(lane.cause.as_deref());
                insert_assignment(tx, job, lane.lane, agent.as_deref(), state, cause, now)?;
            }
        }
    }
    for (agent, lanes) in by_agent {
        let version = job.current_version.clone();
        enqueue(
            tx,
            &agent,
            job,
            &version,
            &CommandAction::Stop { lanes },
            now,
        )?;
    }
    Ok(())
}

fn live_agents(tx: &Transaction<'_>) -> Result<Vec<String>> {
    let mut stmt = tx
        .prepare_cached("SELECT agent_id FROM agents WHERE state = 'live'")
        .map_err(HubError::store("reading live agents"))?;
    stmt.query_map([], |r| r.get(0))
        .and_then(|rows| rows.collect::<rusqlite::Result<Vec<String>>>())
        .map_err(HubError::store("reading live agents"))
}

/// Re-places `job`'s lanes that lost their Agent (state `lost`) in a new generation; the other
/// lanes stay on their Agents, and every lane gets a `run` that restores `latest`.
pub(crate) fn replace_lost(tx: &Transaction<'_>, job: &mut JobRow, now: i64) -> Result<()> {
    let before = lanes(tx, job)?;
    bump_generation(tx, job, DesiredState::Running, Restore::Latest)?;
    let Candidates {
        mut loads,
        wait_cause,
    } = agent_loads(tx, job)?;
    let mut placed = Vec::new();
    let mut lost = Vec::new();
    for lane in &before {
        match (&lane.agent_id, lane.state.as_str()) {
            (Some(agent), s) if s != "lost" && loads.iter().any(|l| &l.agent_id == agent) => {
                if let Some(load) = loads.iter_mut().find(|l| &l.agent_id == agent) {
                    load.lanes += 1;
                }
                placed.push((lane.lane, Some(agent.clone())));
            }
            _ => lost.push(lane.lane),
        }
    }
    placed.extend(place(&lost, &mut loads));
    placed.sort();
    insert_placed(tx, job, &placed, &wait_cause, now)?;
    send_runs(tx, job, &placed, now)
}

/// Places the lanes of running jobs that wait for a slot (same generation).
pub(crate) fn place_waiting(tx: &Transaction<'_>, now: i64) -> Result<()> {
    let context = "placing waiting lanes";
    let mut stmt = tx
        .prepare_cached(
            "SELECT DISTINCT a.job_id FROM assignments a JOIN jobs j \
             ON a.job_id = j.job_id AND a.generation = j.generation \
             WHERE a.agent_id IS NULL AND j.desired_state = 'running' ORDER BY a.job_id",
        )
        .map_err(HubError::store(context))?;
    let jobs = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
        .map_err(HubError::store(context))?;
    for job_id in jobs {
        let job = require_job(tx, &job_id)?;
        let waiting: Vec<u32> = lanes(tx, &job)?
            .into_iter()
            .filter(|l| l.agent_id.is_none())
            .map(|l| l.lane)
            .collect();
        let mut candidates = agent_loads(tx, &job)?;
        let (placed, still_waiting): (Vec<_>, Vec<_>) = place(&waiting, &mut candidates.loads)
            .into_iter()
            .partition(|(_, a)| a.is_some());
        for (lane, agent) in &placed {
            tx.execute(
                "UPDATE assignments SET agent_id = ?1, cause = NULL, updated_at = ?2 \
                 WHERE job_id = ?3 AND generation = ?4 AND lane = ?5",
                params![agent, now, job.job_id, to_i64(job.generation), lane],
            )
            .map_err(HubError::store(context))?;
        }
        for (lane, _) in &still_waiting {
            // The reason may have changed (an Agent registered that cannot take the lane
            // either); the lane's time changes only with it.
            tx.execute(
                "UPDATE assignments SET cause = ?1, updated_at = ?2 \
                 WHERE job_id = ?3 AND generation = ?4 AND lane = ?5 AND cause IS NOT ?1",
                params![
                    candidates.wait_cause,
                    now,
                    job.job_id,
                    to_i64(job.generation),
                    lane
                ],
            )
            .map_err(HubError::store(context))?;
        }
        send_runs(tx, &job, &placed, now)?;
    }
    Ok(())
}

impl Store {
    /// Stores a new job with its first version; starts it when `desired` is running.
    ///
    /// # Errors
    /// 409 naming `name` when a job of that name exists.
    pub fn submit(
        &self,
        name: &str,
        compiled: &Compiled,
        sql: Option<&str>,
        spec: Option<&serde_json::Value>,
        desired: DesiredState,
        now: i64,
    ) -> Result<JobSummary> {
        self.write("submitting a job", |tx| {
            if job_row(tx, name)?.is_some() {
                return Err(HubError::conflict(
                    "name",
                    format!("a job named `{name}` exists"),
                ));
            }
            // The version references the job and the job its version: insert the job with its
            // version id first (foreign keys are checked per statement on the version only).
            let version_id = format!("{name}-v1");
            tx.execute(
                "INSERT INTO jobs (job_id, desired_state, generation, current_version, created_at) \
                 VALUES (?1, 'stopped', 0, ?2, ?3)",
                params![name, version_id, now],
            )
            .map_err(HubError::store("submitting a job"))?;
            let stored =
                insert_version(tx, name, compiled, sql, spec, &StateActions::default(), now)?;
            debug_assert_eq!(stored, version_id);
            let mut job = require_job(tx, name)?;
            if desired == DesiredState::Running {
                start(tx, &mut job, now)?;
            }
            summary(tx, &job)
        })
    }

    /// Changes a job's desired state in a new generation.
    ///
    /// # Errors
    /// 404 for an unknown job; 409 naming `generation` when `change.generation` is not the
    /// job's generation.
    pub fn change_desired_state(
        &self,
        job_id: &str,
        change: &DesiredStateChange,
        now: i64,
    ) -> Result<JobSummary> {
        self.write("changing a job's desired state", |tx| {
            let mut job = require_job(tx, job_id)?;
            if let Some(expected) = change.generation
                && expected != job.generation
            {
                return Err(HubError::conflict(
                    "generation",
                    format!(
                        "generation {expected} is stale: job `{job_id}` is at generation {}",
                        job.generation
                    ),
                ));
            }
            match change.desired_state {
                DesiredState::Running => start(tx, &mut job, now)?,
                DesiredState::Stopped => stop(tx, &mut job, now)?,
            }
            summary(tx, &job)
        })
    }

    /// Every job, by id.
    ///
    /// # Errors
    /// [`HubError::Store`].
    pub fn list_jobs(&self) -> Result<Vec<JobSummary>> {
        self.read("listing jobs", |tx| {
            let ids = {
                let mut stmt = tx
                    .prepare_cached("SELECT job_id FROM jobs ORDER BY job_id")
                    .map_err(HubError::store("listing jobs"))?;
                stmt.query_map([], |r| r.get::<_, String>(0))
                    .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
                    .map_err(HubError::store("listing jobs"))?
            };
            ids.iter()
                .map(|id| summary(tx, &require_job(tx, id)?))
                .collect()
        })
    }

    /// One job.
    ///
    /// # Errors
    /// 404 for an unknown job.
    pub fn job(&self, job_id: &str) -> Result<JobSummary> {
        self.read("reading a job", |tx| summary(tx, &require_job(tx, job_id)?))
    }

    /// The current generation of job `job_id`.
    ///
    /// # Errors
    /// 404 for an unknown job.
    pub fn generation(&self, job_id: &str) -> Result<u64> {
        self.read("reading a job's generation", |tx| {
            require_job(tx, job_id).map(|j| j.generation)
        })
    }

    /// The lanes Agent `agent_id` is assigned in its jobs' current generations, as
    /// `(job, lane, generation)`: the only lanes whose readings it may push.
    ///
    /// # Errors
    /// [`HubError::Store`].
    pub fn lanes_of_agent(&self, agent_id: &str) -> Result<BTreeSet<(String, u32, u64)>> {
        let context = "reading an Agent's lanes";
        self.read(context, |tx| {
            let mut stmt = tx
                .prepare_cached(
                    "SELECT a.job_id, a.lane, a.generation FROM assignments a JOIN jobs j \
                     ON a.job_id = j.job_id AND a.generation = j.generation \
                     WHERE a.agent_id = ?1",
                )
                .map_err(HubError::store(context))?;
            stmt.query_map([agent_id], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    super::to_u32(r.get::<_, i64>(1)?),
                    to_u64(r.get::<_, i64>(2)?),
                ))
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<BTreeSet<_>>>())
            .map_err(HubError::store(context))
        })
    }

    /// Every version of a job, oldest first.
    ///
    /// # Errors
    /// 404 for an unknown job.
    pub fn versions(&self, job_id: &str) -> Result<Vec<JobVersion>> {
        self.read("reading job versions", |tx| {
            require_job(tx, job_id)?;
            let ids = {
                let mut stmt = tx
                    .prepare_cached(
                        "SELECT version_id FROM job_versions WHERE job_id = ?1 ORDER BY number",
                    )
                    .map_err(HubError::store("reading job versions"))?;
                stmt.query_map([job_id], |r| r.get::<_, String>(0))
                    .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
                    .map_err(HubError::store("reading job versions"))?
            };
            ids.iter()
                .map(|id| Ok(version_row(tx, id)?.version))
                .collect()
        })
    }
}
