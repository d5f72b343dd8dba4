//! Agents: registration (sessions), leases, the command outbox.

use super::jobs::{job_row, place_waiting, replace_lost};
use super::sessions::authenticate;
use super::{Store, from_stored, new_id, optional, rfc3339, to_stored, to_u64};
use crate::auth::{hash_secret, same_secret};
use crate::error::{HubError, Result};
use rusqlite::{Transaction, params};
use weir_control::{
    AgentCapabilities, AgentEntry, AgentState, AssignedLane, Command, CommandAction, DesiredState,
    HeartbeatAck, RegisterAgent, Registration,
};

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The running lanes of every job's current generation, by Agent (the ones `list_agents`
/// counts).
fn assigned_lanes(
    tx: &Transaction<'_>,
) -> Result<std::collections::HashMap<String, Vec<AssignedLane>>> {
    let context = "listing the Agents' lanes";
    let mut stmt = tx
        .prepare_cached(
            "SELECT a.agent_id, a.job_id, a.lane, a.generation, a.state \
             FROM assignments a JOIN jobs j ON a.job_id = j.job_id \
             AND a.generation = j.generation WHERE a.agent_id IS NOT NULL \
             AND a.state NOT IN ('stopped', 'finished', 'failed', 'lost') \
             ORDER BY a.job_id, a.lane",
        )
        .map_err(HubError::store(context))?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                AssignedLane {
                    job_id: r.get(1)?,
                    lane: super::to_u32(r.get::<_, i64>(2)?),
                    generation: to_u64(r.get::<_, i64>(3)?),
                    state: r.get(4)?,
                },
            ))
        })
        .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
        .map_err(HubError::store(context))?;
    let mut by_agent: std::collections::HashMap<String, Vec<AssignedLane>> = Default::default();
    for (agent, lane) in rows {
        by_agent.entry(agent).or_default().push(lane);
    }
    Ok(by_agent)
}

/// Marks the active lanes of `agent_id` in the current generations as lost and re-places the
/// running jobs they belong to; lanes of stopping jobs count as stopped.
fn lose_agent(tx: &Transaction<'_>, agent_id: &str, cause: &str, now: i64) -> Result<()> {
    let context = "moving the lanes of a lost agent";
    let mut stmt = tx
        .prepare_cached(
            "SELECT DISTINCT a.job_id FROM assignments a JOIN jobs j \
             ON a.job_id = j.job_id AND a.generation = j.generation \
             WHERE a.agent_id = ?1 AND a.state NOT IN ('stopped', 'finished', 'failed', 'lost') \
             ORDER BY a.job_id",
        )
        .map_err(HubError::store(context))?;
    let jobs = stmt
        .query_map([agent_id], |r| r.get::<_, String>(0))
        .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
        .map_err(HubError::store(context))?;
    for job_id in jobs {
        let Some(mut job) = job_row(tx, &job_id)? else {
            continue;
        };
        let state = match job.desired {
            DesiredState::Running => "lost",
            DesiredState::Stopped => "stopped",
        };
        tx.execute(
            "UPDATE assignments SET state = ?1, cause = ?2, updated_at = ?3 \
             WHERE job_id = ?4 AND generation = ?5 AND agent_id = ?6 \
             AND state NOT IN ('stopped', 'finished', 'failed', 'lost')",
            params![
                state,
                cause,
                now,
                job.job_id,
                super::to_i64(job.generation),
                agent_id
            ],
        )
        .map_err(HubError::store(context))?;
        if job.desired == DesiredState::Running {
            replace_lost(tx, &mut job, now)?;
        }
    }
    Ok(())
}

impl Store {
    /// Registers an Agent: a new session (its report sequence starts at 0) and a fresh lease.
    /// The same boot id as before is a reconnect that keeps the Agent's lanes; a new one is a
    /// restart, whose lanes are placed anew.
    ///
    /// An Agent id belongs to the credential of its first registration: another credential is
    /// refused (403) and logged. The session token is answered once; the store keeps its hash.
    ///
    /// # Errors
    /// 400 naming `agentId`, `bootId`, `credential` or `capabilities.slots` for bad values; 403
    /// for another credential than the Agent id's.
    pub fn register(&self, request: &RegisterAgent, now: i64) -> Result<Registration> {
        if !valid_id(&request.agent_id) {
            return Err(HubError::bad_request(
                "agentId",
                "expected 1 to 128 characters of [A-Za-z0-9_.-]",
            ));
        }
        if request.credential.len() < 16 || request.credential.len() > 512 {
            return Err(HubError::bad_request(
                "credential",
                "expected 16 to 512 characters: the Agent's own secret, kept across its restarts",
            ));
        }
        if request.boot_id.is_empty() || request.boot_id.len() > 128 {
            return Err(HubError::bad_request(
                "bootId",
                "expected 1 to 128 characters",
            ));
        }
        let ttl = self.lease_ttl_ms();
        self.write("registering an agent", |tx| {
            let context = "registering an agent";
            let previous = optional(
                context,
                tx.query_row(
                    "SELECT boot_id, session_id, credential_hash FROM agents WHERE agent_id = ?1",
                    [&request.agent_id],
                    |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, String>(1)?,
                            r.get::<_, String>(2)?,
                        ))
                    },
                ),
            )?;
            let credential = hash_secret(&request.credential);
            if let Some((_, _, bound)) = &previous
                && !bound.is_empty()
                && !same_secret(bound, &credential)
            {
                tracing::warn!(
                    agent = %request.agent_id,
                    "refused a registration: Agent id taken with another credential"
                );
                return Err(HubError::Forbidden(format!(
                    "agentId: Agent `{}` is registered with another credential; an Agent keeps \
                     its credential file across restarts, a new Agent takes a new id",
                    request.agent_id
                )));
            }
            let session_id = new_id();
            let token = crate::auth::random_hex(32)?;
            let token_hash = hash_secret(&token);
            let capabilities = to_stored("capabilities", &request.capabilities)?;
            match &previous {
                Some((_, old_session, _)) => {
                    tx.execute(
                        "UPDATE agent_sessions SET ended_at = ?1 WHERE session_id = ?2",
                        params![now, old_session],
                    )
                    .and_then(|_| {
                        tx.execute(
                            "UPDATE agents SET boot_id = ?1, session_id = ?2, session_token = ?3, \
                             capabilities = ?4, state = 'live', lease_expires_at = ?5, \
                             registered_at = ?6, credential_hash = ?7 WHERE agent_id = ?8",
                            params![
                                request.boot_id,
                                session_id,
                                token_hash,
                                capabilities,
                                now + ttl,
                                now,
                                credential,
                                request.agent_id
                            ],
                        )
                    })
                    .map_err(HubError::store(context))?;
                }
                None => {
                    tx.execute(
                        "INSERT INTO agents (agent_id, boot_id, session_id, session_token, \
                         capabilities, state, lease_expires_at, registered_at, credential_hash) \
                         VALUES (?1, ?2, ?3, ?4, ?5, 'live', ?6, ?7, ?8)",
                        params![
                            request.agent_id,
                            request.boot_id,
                            session_id,
                            token_hash,
                            capabilities,
                            now + ttl,
                            now,
                            credential
                        ],
                    )
                    .map_err(HubError::store(context))?;
                }
            }
            tx.execute(
                "INSERT INTO agent_sessions (session_id, agent_id, boot_id, started_at) \
                 VALUES (?1, ?2, ?3, ?4)",
                params![session_id, request.agent_id, request.boot_id, now],
            )
            .map_err(HubError::store(context))?;
            if let Some((old_boot, _, _)) = &previous
                && old_boot != &request.boot_id
            {
                // A restart: what ran in the old process is gone, and its commands with it.
                tx.execute(
                    "UPDATE outbox SET state = 'superseded' WHERE agent_id = ?1 \
                     AND state IN ('pending', 'claimed')",
                    [&request.agent_id],
                )
                .map_err(HubError::store(context))?;
                lose_agent(tx, &request.agent_id, "the Agent restarted", now)?;
            }
            place_waiting(tx, now)?;
            Ok(Registration {
                session_id,
                session_token: token,
                lease_ttl_ms: super::to_u64(ttl),
                heartbeat_interval_ms: super::to_u64((ttl / 3).max(1)),
            })
        })
    }

    /// Renews the lease of the session `token` names.
    ///
    /// # Errors
    /// 404 for an unknown Agent; 409 for a stale session or a lapsed lease.
    pub fn heartbeat(&self, agent_id: &str, token: &str, now: i64) -> Result<HeartbeatAck> {
        let ttl = self.lease_ttl_ms();
        self.write("renewing a lease", |tx| {
            let session = authenticate(tx, agent_id, token)?;
            tx.execute(
                "UPDATE agents SET lease_expires_at = ?1 WHERE agent_id = ?2",
                params![now + ttl, agent_id],
            )
            .map_err(HubError::store("renewing a lease"))?;
            Ok(HeartbeatAck {
                session_id: session.session_id,
                lease_expires_at_ms: now + ttl,
            })
        })
    }

    /// Checks that `token` is live Agent `agent_id`'s current session, changing nothing.
    ///
    /// # Errors
    /// 404 for an unknown Agent; 409 for a stale session or a lapsed lease.
    pub fn check_session(&self, agent_id: &str, token: &str) -> Result<()> {
        self.read("checking a session", |tx| {
            authenticate(tx, agent_id, token).map(|_| ())
        })
    }

    /// Commands in the outbox not yet acknowledged: `(pending, claimed)`.
    ///
    /// # Errors
    /// [`HubError::Store`].
    pub fn outbox_depth(&self) -> Result<(u64, u64)> {
        self.read("counting outbox commands", |tx| {
            tx.query_row(
                "SELECT count(*) FILTER (WHERE state = 'pending'), \
                        count(*) FILTER (WHERE state = 'claimed') FROM outbox",
                [],
                |r| Ok((to_u64(r.get(0)?), to_u64(r.get(1)?))),
            )
            .map_err(HubError::store("counting outbox commands"))
        })
    }

    /// Claims the Agent's unacknowledged commands (pending and earlier claimed ones), oldest
    /// first.
    ///
    /// # Errors
    /// 404 for an unknown Agent; 409 for a stale session.
    pub fn claim_commands(&self, agent_id: &str, token: &str, now: i64) -> Result<Vec<Command>> {
        self.write("claiming commands", |tx| {
            let context = "claiming commands";
            authenticate(tx, agent_id, token)?;
            let rows = {
                let mut stmt = tx
                    .prepare_cached(
                        "SELECT command_id, job_id, version_id, generation, action FROM outbox \
                         WHERE agent_id = ?1 AND state IN ('pending', 'claimed') ORDER BY seq",
                    )
                    .map_err(HubError::store(context))?;
                stmt.query_map([agent_id], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, i64>(3)?,
                        r.get::<_, String>(4)?,
                    ))
                })
                .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
                .map_err(HubError::store(context))?
            };
            tx.execute(
                "UPDATE outbox SET state = 'claimed', claimed_at = ?1 \
                 WHERE agent_id = ?2 AND state = 'pending'",
                params![now, agent_id],
            )
            .map_err(HubError::store(context))?;
            rows.into_iter()
                .map(|(command_id, job_id, version_id, generation, action)| {
                    Ok(Command {
                        command_id,
                        job_id,
                        version_id,
                        generation: to_u64(generation),
                        action: from_stored::<CommandAction>("command", &action)?,
                    })
                })
                .collect()
        })
    }

    /// Every Agent, by id.
    ///
    /// # Errors
    /// [`HubError::Store`].
    pub fn list_agents(&self) -> Result<Vec<AgentEntry>> {
        self.read("listing agents", |tx| {
            let context = "listing agents";
            let mut stmt = tx
                .prepare_cached(
                    "SELECT g.agent_id, g.boot_id, g.session_id, g.state, g.capabilities, \
                     g.lease_expires_at, g.registered_at, g.refused_report_items, \
                     g.refused_reports, \
                     (SELECT COUNT(*) FROM assignments a JOIN jobs j ON a.job_id = j.job_id \
                      AND a.generation = j.generation WHERE a.agent_id = g.agent_id \
                      AND a.state NOT IN ('stopped', 'finished', 'failed', 'lost')) \
                     FROM agents g ORDER BY g.agent_id",
                )
                .map_err(HubError::store(context))?;
            let rows = stmt
                .query_map([], |r| {
                    Ok((
                        (
                            r.get::<_, String>(0)?,
                            r.get::<_, String>(1)?,
                            r.get::<_, String>(2)?,
                            r.get::<_, String>(3)?,
                            r.get::<_, String>(4)?,
                        ),
                        (
                            r.get::<_, i64>(5)?,
                            r.get::<_, i64>(6)?,
                            r.get::<_, i64>(7)?,
                            r.get::<_, i64>(8)?,
                            r.get::<_, i64>(9)?,
                        ),
                    ))
                })
                .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
                .map_err(HubError::store(context))?;
            let mut assigned = assigned_lanes(tx)?;
            rows.into_iter()
                .map(
                    |(
                        (agent_id, boot_id, session_id, state, caps),
                        (lease, reg, items, reports, lanes),
                    )| {
                        Ok(AgentEntry {
                            assigned: assigned.remove(&agent_id).unwrap_or_default(),
                            agent_id,
                            boot_id,
                            session_id,
                            state: if state == "live" {
                                AgentState::Live
                            } else {
                                AgentState::Expired
                            },
                            capabilities: from_stored::<AgentCapabilities>("capabilities", &caps)?,
                            lanes: super::to_u32(lanes),
                            lease_expires_at: rfc3339(lease),
                            registered_at: rfc3339(reg),
                            refused_report_items: to_u64(items),
                            refused_reports: to_u64(reports),
                        })
                    },
                )
                .collect()
        })
    }

    /// Expires the leases that lapsed before `now`: the Agents' sessions end and their lanes
    /// are re-placed on the others in a new generation. Returns the expired Agents.
    ///
    /// # Errors
    /// [`HubError::Store`].
    pub fn expire_leases(&self, now: i64) -> Result<Vec<String>> {
        self.write("expiring leases", |tx| {
            let context = "expiring leases";
            let expired = {
                let mut stmt = tx
                    .prepare_cached(
                        "SELECT agent_id FROM agents WHERE state = 'live' AND lease_expires_at < ?1 \
                         ORDER BY agent_id",
                    )
                    .map_err(HubError::store(context))?;
                stmt.query_map([now], |r| r.get::<_, String>(0))
                    .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
                    .map_err(HubError::store(context))?
            };
            for agent in &expired {
                tx.execute(
                    "UPDATE agents SET state = 'expired' WHERE agent_id = ?1",
                    [agent],
                )
                .and_then(|_| {
                    tx.execute(
                        "UPDATE agent_sessions SET ended_at = ?1 \
                         WHERE agent_id = ?2 AND ended_at IS NULL",
                        params![now, agent],
                    )
                })
                .map_err(HubError::store(context))?;
            }
            for agent in &expired {
                lose_agent(tx, agent, "the Agent's lease lapsed", now)?;
            }
            place_waiting(tx, now)?;
            Ok(expired)
        })
    }
}
