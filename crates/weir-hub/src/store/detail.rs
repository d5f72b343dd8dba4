//! What the API shows of a job in one read: its detail.

use super::jobs::{lane_history, lanes, require_job, summary, version_row};
use super::{Store, from_stored};
use crate::error::Result;
use weir_control::{Assignment, JobDetail};

impl Store {
    /// Everything about a job.
    ///
    /// # Errors
    /// 404 for an unknown job.
    pub fn detail(&self, job_id: &str) -> Result<JobDetail> {
        self.read("reading a job's detail", |tx| {
            let job = require_job(tx, job_id)?;
            let version = version_row(tx, &job.current_version)?;
            let assignments = lanes(tx, &job)?
                .into_iter()
                .map(|l| Assignment {
                    lane: l.lane,
                    agent_id: l.agent_id,
                    state: l.state,
                    cause: l.cause,
                })
                .collect();
            Ok(JobDetail {
                job: summary(tx, &job)?,
                plans: from_stored("plans", &version.plans_json)?,
                version: version.version,
                assignments,
                recovery_records: super::reports::recovery_records(tx, job_id)?,
                upgrades: super::upgrades::upgrade_records(tx, job_id)?,
                lane_history: lane_history(tx, job_id)?,
            })
        })
    }
}
