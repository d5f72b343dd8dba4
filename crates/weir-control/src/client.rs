//! [`HubClient`]: one method per endpoint of the Hub.

use crate::agent::{
    AgentEntry, Command, HeartbeatAck, RegisterAgent, Registration, ReportAck, ReportBatch,
};
use crate::error::{ApiError, ControlError, Result};
use crate::jobs::{
    CheckpointAccepted, CheckpointRequest, DesiredStateChange, JobDetail, JobSummary, JobVersion,
    SavepointRequest, SubmitJob, UpgradeRecord, UpgradeRequest, ValidateRequest, ValidateResult,
};
use crate::live::{CheckpointsView, JobMetricsView, MetricsAck, MetricsPush};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use reqwest::{Method, header};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A client of one Hub. Bodies go as JSON; an error status comes back as
/// [`ControlError::Api`] with the Hub's JSON error. User endpoints carry the client's token
/// ([`HubClient::with_token`]); Agent endpoints carry the session token they are given.
#[derive(Clone)]
pub struct HubClient {
    base: String,
    http: reqwest::Client,
    token: Option<String>,
}

impl std::fmt::Debug for HubClient {
    /// Never prints the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubClient")
            .field("base", &self.base)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// What a path segment keeps unencoded: RFC 3986's unreserved characters.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// Percent-encodes one path segment (an id a user typed may hold `/` or spaces).
fn segment(s: &str) -> String {
    utf8_percent_encode(s, SEGMENT).to_string()
}

impl HubClient {
    /// A client of the Hub at `base` (`http://127.0.0.1:7800`).
    ///
    /// # Errors
    /// [`ControlError::InvalidUrl`] when `base` is not an `http://` or `https://` URL.
    pub fn new(base: &str) -> Result<Self> {
        let trimmed = base.trim_end_matches('/');
        if !(trimmed.starts_with("http://") || trimmed.starts_with("https://")) {
            return Err(ControlError::InvalidUrl {
                url: base.to_owned(),
                message: "expected an http:// or https:// URL".into(),
            });
        }
        Ok(HubClient {
            base: trimmed.to_owned(),
            http: reqwest::Client::new(),
            token: None,
        })
    }

    /// This client, sending `token` (an API token from `weir hub token create`) as
    /// `Authorization: Bearer` on the user endpoints.
    #[must_use]
    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// This client, verifying the Hub's TLS certificate against the PEM CA certificate(s) in
    /// `pem` (read from `path`, which errors name) besides the system's roots: a Hub with a
    /// self-signed or private-CA certificate.
    ///
    /// # Errors
    /// [`ControlError::Certificate`] when `pem` holds no usable certificate.
    pub fn with_ca_certificate(mut self, pem: &[u8], path: &str) -> Result<Self> {
        let refused = |message: String| ControlError::Certificate {
            path: path.to_owned(),
            message,
        };
        let certificates =
            reqwest::Certificate::from_pem_bundle(pem).map_err(|e| refused(e.to_string()))?;
        if certificates.is_empty() {
            return Err(refused("no PEM certificate in it".into()));
        }
        let mut builder = reqwest::Client::builder();
        for certificate in certificates {
            builder = builder.add_root_certificate(certificate);
        }
        self.http = builder.build().map_err(|e| refused(e.to_string()))?;
        Ok(self)
    }

    /// The Hub's base URL.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    async fn call<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<&B>,
    ) -> Result<T> {
        let url = format!("{}{path}", self.base);
        let mut request = self.http.request(method.clone(), &url);
        if let Some(token) = token.or(self.token.as_deref()) {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        if let Some(body) = body {
            let bytes = serde_json::to_vec(body).map_err(|source| ControlError::Decode {
                method: method.to_string(),
                url: url.clone(),
                source,
            })?;
            request = request
                .header(header::CONTENT_TYPE, "application/json")
                .body(bytes);
        }
        let transport = |source| ControlError::Transport {
            method: method.to_string(),
            url: url.clone(),
            source,
        };
        let response = request.send().await.map_err(transport)?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(transport)?;
        if !status.is_success() {
            let error = serde_json::from_slice::<ApiError>(&bytes)
                .unwrap_or_else(|_| ApiError::new(String::from_utf8_lossy(&bytes).into_owned()));
            return Err(ControlError::Api {
                method: method.to_string(),
                url,
                status: status.as_u16(),
                error,
            });
        }
        serde_json::from_slice(&bytes).map_err(|source| ControlError::Decode {
            method: method.to_string(),
            url,
            source,
        })
    }

    /// `POST /api/v1/jobs/validate`.
    ///
    /// # Errors
    /// As every method: [`ControlError`].
    pub async fn validate(&self, request: &ValidateRequest) -> Result<ValidateResult> {
        self.call(Method::POST, "/api/v1/jobs/validate", None, Some(request))
            .await
    }

    /// `POST /api/v1/jobs`.
    ///
    /// # Errors
    /// 409 when the name is taken, 422 when the job is invalid.
    pub async fn submit(&self, request: &SubmitJob) -> Result<JobSummary> {
        self.call(Method::POST, "/api/v1/jobs", None, Some(request))
            .await
    }

    /// `GET /api/v1/jobs`.
    ///
    /// # Errors
    /// [`ControlError`].
    pub async fn list_jobs(&self) -> Result<Vec<JobSummary>> {
        self.call::<(), _>(Method::GET, "/api/v1/jobs", None, None)
            .await
    }

    /// `GET /api/v1/jobs/{job_id}`.
    ///
    /// # Errors
    /// 404 for an unknown job.
    pub async fn get_job(&self, job_id: &str) -> Result<JobSummary> {
        let path = format!("/api/v1/jobs/{}", segment(job_id));
        self.call::<(), _>(Method::GET, &path, None, None).await
    }

    /// `GET /api/v1/jobs/{job_id}/detail`.
    ///
    /// # Errors
    /// 404 for an unknown job.
    pub async fn job_detail(&self, job_id: &str) -> Result<JobDetail> {
        let path = format!("/api/v1/jobs/{}/detail", segment(job_id));
        self.call::<(), _>(Method::GET, &path, None, None).await
    }

    /// `GET /api/v1/jobs/{job_id}/versions`.
    ///
    /// # Errors
    /// 404 for an unknown job.
    pub async fn job_versions(&self, job_id: &str) -> Result<Vec<JobVersion>> {
        let path = format!("/api/v1/jobs/{}/versions", segment(job_id));
        self.call::<(), _>(Method::GET, &path, None, None).await
    }

    /// `PUT /api/v1/jobs/{job_id}/desired-state`.
    ///
    /// # Errors
    /// 409 when `generation` is given and no longer the job's.
    pub async fn set_desired_state(
        &self,
        job_id: &str,
        change: &DesiredStateChange,
    ) -> Result<JobSummary> {
        let path = format!("/api/v1/jobs/{}/desired-state", segment(job_id));
        self.call(Method::PUT, &path, None, Some(change)).await
    }

    /// `POST /api/v1/jobs/{job_id}/checkpoints`.
    ///
    /// # Errors
    /// 409 when the job is not running on placed lanes.
    pub async fn checkpoint(&self, job_id: &str) -> Result<CheckpointAccepted> {
        let path = format!("/api/v1/jobs/{}/checkpoints", segment(job_id));
        self.call(Method::POST, &path, None, Some(&CheckpointRequest {}))
            .await
    }

    /// `POST /api/v1/jobs/{job_id}/savepoints`.
    ///
    /// # Errors
    /// 409 when the job is not running on placed lanes.
    pub async fn savepoint(
        &self,
        job_id: &str,
        request: &SavepointRequest,
    ) -> Result<CheckpointAccepted> {
        let path = format!("/api/v1/jobs/{}/savepoints", segment(job_id));
        self.call(Method::POST, &path, None, Some(request)).await
    }

    /// `POST /api/v1/jobs/{job_id}/upgrades`.
    ///
    /// # Errors
    /// 409 when the job is not stopped or the savepoint does not fit, 422 when the new version
    /// is invalid.
    pub async fn upgrade(&self, job_id: &str, request: &UpgradeRequest) -> Result<UpgradeRecord> {
        let path = format!("/api/v1/jobs/{}/upgrades", segment(job_id));
        self.call(Method::POST, &path, None, Some(request)).await
    }

    /// `POST /api/v1/jobs/{job_id}/upgrades/preview`: what the upgrade would do with each
    /// operator's state, changing nothing.
    ///
    /// # Errors
    /// 409 when the current version has no operator profiles and the logic changed, 422 when
    /// the new version is invalid.
    pub async fn preview_upgrade(
        &self,
        job_id: &str,
        request: &UpgradeRequest,
    ) -> Result<crate::UpgradePreview> {
        let path = format!("/api/v1/jobs/{}/upgrades/preview", segment(job_id));
        self.call(Method::POST, &path, None, Some(request)).await
    }

    /// `POST /api/v1/jobs/{job_id}/upgrades/{upgrade_id}/rollback`.
    ///
    /// # Errors
    /// 409 when the job is not stopped or the upgrade is not the one in force.
    pub async fn rollback(&self, job_id: &str, upgrade_id: &str) -> Result<UpgradeRecord> {
        let path = format!(
            "/api/v1/jobs/{}/upgrades/{}/rollback",
            segment(job_id),
            segment(upgrade_id)
        );
        self.call::<(), _>(Method::POST, &path, None, None).await
    }

    /// `GET /api/v1/agents`.
    ///
    /// # Errors
    /// [`ControlError`].
    pub async fn list_agents(&self) -> Result<Vec<AgentEntry>> {
        self.call::<(), _>(Method::GET, "/api/v1/agents", None, None)
            .await
    }

    /// `POST /api/v1/agents/register` with the Hub's join token: starts a new session.
    ///
    /// # Errors
    /// 400 for bad capabilities; 401/403 without the join token or for an Agent id registered
    /// with another credential.
    pub async fn register(
        &self,
        join_token: &str,
        request: &RegisterAgent,
    ) -> Result<Registration> {
        self.call(
            Method::POST,
            "/api/v1/agents/register",
            Some(join_token),
            Some(request),
        )
        .await
    }

    /// `POST /api/v1/agents/{agent_id}/heartbeat`: renews the lease.
    ///
    /// # Errors
    /// 409 when the session is no longer the Agent's: it registered again, or its lease
    /// lapsed and its lanes were placed on other Agents (stop them, then register again).
    pub async fn heartbeat(&self, agent_id: &str, token: &str) -> Result<HeartbeatAck> {
        let path = format!("/api/v1/agents/{}/heartbeat", segment(agent_id));
        self.call::<(), _>(Method::POST, &path, Some(token), None)
            .await
    }

    /// `GET /api/v1/agents/{agent_id}/commands`: the unacknowledged commands, claimed.
    ///
    /// # Errors
    /// 409 when the session is no longer the Agent's.
    pub async fn commands(&self, agent_id: &str, token: &str) -> Result<Vec<Command>> {
        let path = format!("/api/v1/agents/{}/commands", segment(agent_id));
        self.call::<(), _>(Method::GET, &path, Some(token), None)
            .await
    }

    /// `POST /api/v1/agents/{agent_id}/reports`.
    ///
    /// # Errors
    /// 409 for an old session or a `seq` that is not the next one.
    pub async fn report(
        &self,
        agent_id: &str,
        token: &str,
        batch: &ReportBatch,
    ) -> Result<ReportAck> {
        let path = format!("/api/v1/agents/{}/reports", segment(agent_id));
        self.call(Method::POST, &path, Some(token), Some(batch))
            .await
    }

    /// `POST /api/v1/agents/{agent_id}/metrics`: the readings of the Agent's running lanes.
    ///
    /// # Errors
    /// 409 when the session is no longer the Agent's.
    pub async fn push_metrics(
        &self,
        agent_id: &str,
        token: &str,
        push: &MetricsPush,
    ) -> Result<MetricsAck> {
        let path = format!("/api/v1/agents/{}/metrics", segment(agent_id));
        self.call(Method::POST, &path, Some(token), Some(push))
            .await
    }

    /// `GET /api/v1/jobs/{job_id}/metrics`: the recent counters of the job's lanes.
    ///
    /// # Errors
    /// 404 for an unknown job.
    pub async fn job_metrics(&self, job_id: &str) -> Result<JobMetricsView> {
        let path = format!("/api/v1/jobs/{}/metrics", segment(job_id));
        self.call::<(), _>(Method::GET, &path, None, None).await
    }

    /// `GET /api/v1/jobs/{job_id}/checkpoints`: the job's checkpoints, per lane and job-level.
    ///
    /// # Errors
    /// 404 for an unknown job.
    pub async fn job_checkpoints(&self, job_id: &str) -> Result<CheckpointsView> {
        let path = format!("/api/v1/jobs/{}/checkpoints", segment(job_id));
        self.call::<(), _>(Method::GET, &path, None, None).await
    }

    /// `GET /api/v1/openapi.json`.
    ///
    /// # Errors
    /// [`ControlError`].
    pub async fn openapi(&self) -> Result<serde_json::Value> {
        self.call::<(), _>(Method::GET, "/api/v1/openapi.json", None, None)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_encoded_as_one_segment() {
        assert_eq!(segment("a-b_c.d"), "a-b_c.d");
        assert_eq!(segment("a/b c"), "a%2Fb%20c");
    }

    #[test]
    fn a_base_url_must_be_http() {
        assert!(HubClient::new("127.0.0.1:7800").is_err());
        let client = HubClient::new("http://127.0.0.1:7800/").unwrap();
        assert_eq!(client.base_url(), "http://127.0.0.1:7800");
    }
}
