//! Upgrades (a new version started from a savepoint of the current one) and rollbacks.

use super::jobs::{JobRow, VersionRow, insert_version, lanes, require_job, version_row};
use super::{Store, from_stored, optional, rfc3339, to_stored, to_u32};
use crate::compile::Compiled;
use crate::error::{HubError, Result};
use crate::observed::aggregate;
use rusqlite::{Transaction, params};
use std::collections::BTreeMap;
use weir::plan::evolution::{EvolutionActions, compare};
use weir_control::{
    DesiredState, ObservedPhase, UpgradePreview, UpgradeRecord, UpgradeRequest, UpgradeState,
};

/// Refuses (409) unless the job is stopped and every lane reports it.
fn require_stopped(tx: &Transaction<'_>, job: &JobRow) -> Result<()> {
    let observed = aggregate(job.desired, &lanes(tx, job)?);
    if job.desired != DesiredState::Stopped || observed.phase != ObservedPhase::Stopped {
        return Err(HubError::conflict(
            "desiredState",
            format!(
                "job `{}` must be stopped and converged (desired {}, observed {:?})",
                job.job_id,
                job.desired.as_str(),
                observed.phase
            ),
        ));
    }
    Ok(())
}

pub(crate) fn upgrade_records(tx: &Transaction<'_>, job_id: &str) -> Result<Vec<UpgradeRecord>> {
    let context = "reading upgrades";
    let mut stmt = tx
        .prepare_cached(
            "SELECT upgrade_id, from_version, to_version, savepoint_id, state, created_at \
             FROM upgrades WHERE job_id = ?1 ORDER BY created_at DESC, rowid DESC",
        )
        .map_err(HubError::store(context))?;
    stmt.query_map([job_id], |r| {
        Ok(UpgradeRecord {
            upgrade_id: r.get(0)?,
            job_id: job_id.to_owned(),
            from_version: r.get(1)?,
            to_version: r.get(2)?,
            savepoint_id: r.get(3)?,
            state: if r.get::<_, String>(4)? == "applied" {
                UpgradeState::Applied
            } else {
                UpgradeState::RolledBack
            },
            created_at: rfc3339(r.get(5)?),
        })
    })
    .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
    .map_err(HubError::store(context))
}

fn savepoint_epochs(tx: &Transaction<'_>, savepoint_id: &str) -> Result<BTreeMap<u32, u64>> {
    let epochs: String = tx
        .query_row(
            "SELECT lane_epochs FROM recovery_records WHERE checkpoint_id = ?1",
            [savepoint_id],
            |r| r.get(0),
        )
        .map_err(HubError::store("reading a savepoint"))?;
    from_stored("lane epochs", &epochs)
}

/// The part of a version's stored plans (as `weir plan` prints them) an upgrade reads.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredPlans {
    partitioned_plan: weir::plan::PartitionedPlan,
}

/// What restoring a savepoint of version `current` (`version_id`) into `compiled` with the
/// request's actions does with each operator's state; a 409 on `field` when `current` was
/// stored without operator profiles and the logic changed.
fn preview(
    current: &VersionRow,
    version_id: &str,
    request: &UpgradeRequest,
    compiled: &Compiled,
    field: &str,
) -> Result<UpgradePreview> {
    let plans: StoredPlans = from_stored("plans", &current.plans_json)?;
    if plans.partitioned_plan.logical_fingerprint() == compiled.logical_fingerprint {
        return Ok(UpgradePreview {
            allowed: true,
            logic_changed: false,
            operators: Vec::new(),
        });
    }
    let Some(profiles) = &current.profiles else {
        return Err(HubError::conflict(
            field,
            format!(
                "the new version changes the job's logic (options, keys or edges) against \
                 version `{version_id}`, which was stored before the Hub recorded its \
                 operators: it can be upgraded only without changing the logic"
            ),
        ));
    };
    let a = &request.actions;
    let actions = EvolutionActions::from_names(a.allow_new_state, &a.drop_state, &a.map_operator);
    let report = compare(profiles, &compiled.profiles, &actions, compiled.strict);
    Ok(UpgradePreview {
        allowed: report.allowed(),
        logic_changed: true,
        operators: report
            .operators
            .iter()
            .map(|c| serde_json::to_value(c).unwrap_or_default())
            .collect(),
    })
}

impl Store {
    /// What an upgrade of job `job_id` with `request` to `compiled` would do with each
    /// operator's state, changing nothing.
    ///
    /// # Errors
    /// 404 for an unknown job; 409 when the current version has no operator profiles and the
    /// logic changed.
    pub fn preview_upgrade(
        &self,
        job_id: &str,
        request: &UpgradeRequest,
        compiled: &Compiled,
    ) -> Result<UpgradePreview> {
        self.read("previewing an upgrade", |tx| {
            let job = require_job(tx, job_id)?;
            let current = version_row(tx, &job.current_version)?;
            let field = if request.sql.is_some() { "sql" } else { "spec" };
            preview(&current, &job.current_version, request, compiled, field)
        })
    }

    /// Makes `compiled` the job's current version, to start from savepoint
    /// `request.savepoint_id` of the version it replaces.
    ///
    /// # Errors
    /// 404 for an unknown job; 409 naming `desiredState` when the job is not stopped and
    /// converged, `savepointId` when it is not a completed savepoint of the current version
    /// with the new version's state format, or the source field when the lane count or the
    /// job's logic (its logical fingerprint) differs.
    pub fn upgrade(
        &self,
        job_id: &str,
        request: &UpgradeRequest,
        compiled: &Compiled,
        now: i64,
    ) -> Result<UpgradeRecord> {
        self.write("upgrading a job", |tx| {
            let context = "upgrading a job";
            let job = require_job(tx, job_id)?;
            require_stopped(tx, &job)?;
            let savepoint = optional(
                context,
                tx.query_row(
                    "SELECT version_id, kind, state_format_version, lane_epochs \
                     FROM recovery_records WHERE checkpoint_id = ?1 AND job_id = ?2",
                    params![request.savepoint_id, job_id],
                    |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, String>(1)?,
                            r.get::<_, i64>(2)?,
                            r.get::<_, String>(3)?,
                        ))
                    },
                ),
            )?;
            let Some((version, kind, state_format, epochs)) = savepoint else {
                return Err(HubError::conflict(
                    "savepointId",
                    format!("job `{job_id}` has no completed savepoint `{}`", request.savepoint_id),
                ));
            };
            if kind != "savepoint" || version != job.current_version {
                return Err(HubError::conflict(
                    "savepointId",
                    format!(
                        "`{}` is not a savepoint of the current version `{}` (it is a {kind} of `{version}`)",
                        request.savepoint_id, job.current_version
                    ),
                ));
            }
            if to_u32(state_format) != weir::state::STATE_FORMAT_VERSION {
                return Err(HubError::conflict(
                    "savepointId",
                    format!(
                        "savepoint `{}` has state format {state_format}, the new version writes {}",
                        request.savepoint_id,
                        weir::state::STATE_FORMAT_VERSION
                    ),
                ));
            }
            let epochs: BTreeMap<u32, u64> = from_stored("lane epochs", &epochs)?;
            let current = version_row(tx, &job.current_version)?;
            // A restore the lanes would refuse is refused here: the job stays stopped on its
            // version instead of failing at the start.
            let field = if request.sql.is_some() { "sql" } else { "spec" };
            let preview = preview(&current, &job.current_version, request, compiled, field)?;
            if !preview.allowed {
                let refusals: Vec<String> = preview
                    .operators
                    .iter()
                    .filter(|c| c["verdict"] == "refused")
                    .map(|c| {
                        format!(
                            "operator `{}` ({}): {}",
                            c["operatorId"].as_str().unwrap_or_default(),
                            c["typeName"].as_str().unwrap_or_default(),
                            c["detail"].as_str().unwrap_or_default()
                        )
                    })
                    .collect();
                return Err(HubError::conflict(
                    field,
                    format!(
                        "the new version changes the job's logic against version `{}` in a way \
                         its lanes would refuse to restore the savepoint into: {} (allow it \
                         with `actions`: allowNewState, dropState, mapOperator; see the \
                         preview)",
                        job.current_version,
                        refusals.join("; ")
                    ),
                ));
            }
            let old_lanes = current.version.lanes;
            if compiled.lanes != old_lanes {
                let field = if request.sql.is_some() { "sql" } else { "spec.parallelism" };
                return Err(HubError::conflict(
                    field,
                    format!(
                        "the new version has {} lanes, the savepoint {old_lanes}: lanes restore \
                         their own state, so the parallelism must stay",
                        compiled.lanes
                    ),
                ));
            }
            let to_version = insert_version(
                tx,
                job_id,
                compiled,
                request.sql.as_deref(),
                request.spec.as_ref(),
                &request.actions,
                now,
            )?;
            let upgrade_id = super::new_id();
            tx.execute(
                "UPDATE jobs SET current_version = ?1, restore_epochs = ?2 WHERE job_id = ?3",
                params![to_version, to_stored("lane epochs", &epochs)?, job_id],
            )
            .and_then(|_| {
                tx.execute(
                    "INSERT INTO upgrades (upgrade_id, job_id, from_version, to_version, \
                     savepoint_id, state, created_at) VALUES (?1, ?2, ?3, ?4, ?5, 'applied', ?6)",
                    params![upgrade_id, job_id, job.current_version, to_version, request.savepoint_id, now],
                )
            })
            .map_err(HubError::store(context))?;
            Ok(UpgradeRecord {
                upgrade_id,
                job_id: job_id.to_owned(),
                from_version: job.current_version,
                to_version,
                savepoint_id: request.savepoint_id.clone(),
                state: UpgradeState::Applied,
                created_at: rfc3339(now),
            })
        })
    }

    /// Makes the version before upgrade `upgrade_id` current again; its next start restores the
    /// savepoint the upgrade started from (taken on that version).
    ///
    /// # Errors
    /// 404 for an unknown job or upgrade; 409 when the job is not stopped and converged or the
    /// upgrade is not the one in force.
    pub fn rollback(&self, job_id: &str, upgrade_id: &str) -> Result<UpgradeRecord> {
        self.write("rolling back an upgrade", |tx| {
            let job = require_job(tx, job_id)?;
            let record = upgrade_records(tx, job_id)?
                .into_iter()
                .find(|u| u.upgrade_id == upgrade_id)
                .ok_or_else(|| HubError::not_found("upgrade", upgrade_id, "upgradeId"))?;
            require_stopped(tx, &job)?;
            if record.state != UpgradeState::Applied || record.to_version != job.current_version {
                return Err(HubError::conflict(
                    "upgradeId",
                    format!(
                        "upgrade `{upgrade_id}` is not the one in force (the current version is `{}`)",
                        job.current_version
                    ),
                ));
            }
            let epochs = savepoint_epochs(tx, &record.savepoint_id)?;
            tx.execute(
                "UPDATE jobs SET current_version = ?1, restore_epochs = ?2 WHERE job_id = ?3",
                params![record.from_version, to_stored("lane epochs", &epochs)?, job_id],
            )
            .and_then(|_| {
                tx.execute(
                    "UPDATE upgrades SET state = 'rolledBack' WHERE upgrade_id = ?1",
                    [upgrade_id],
                )
            })
            .map_err(HubError::store("rolling back an upgrade"))?;
            Ok(UpgradeRecord {
                state: UpgradeState::RolledBack,
                ..record
            })
        })
    }
}
