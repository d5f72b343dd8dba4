//! `GET /metrics`: the Hub's state for Prometheus, read from its store at scrape time and encoded
//! with `prometheus-client` in the OpenMetrics text format (docs/observability.md).

use crate::Hub;
use crate::auth::Viewer;
use crate::error::HubError;
use crate::store::Store;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use std::sync::Arc;
use weir_control::{AgentState, ObservedPhase};

/// The media type of the answer.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What one scrape read from the store.
#[derive(Debug)]
struct Reading {
    /// Jobs by observed phase, every phase named.
    jobs: Vec<(&'static str, i64)>,
    /// Agents by lease state, both named.
    agents: Vec<(&'static str, i64)>,
    /// Unacknowledged outbox commands: pending, claimed.
    outbox: (u64, u64),
    /// Per Agent: reports refused for a stale session or sequence number, report items refused
    /// for an old generation.
    refused: Vec<(String, u64, u64)>,
}

/// The label value of a phase (as the API spells it).
fn phase_name(phase: ObservedPhase) -> &'static str {
    match phase {
        ObservedPhase::Running => "running",
        ObservedPhase::Stopped => "stopped",
        ObservedPhase::Finished => "finished",
        ObservedPhase::Converging => "converging",
        ObservedPhase::Failed => "failed",
    }
}

const PHASES: [ObservedPhase; 5] = [
    ObservedPhase::Running,
    ObservedPhase::Stopped,
    ObservedPhase::Finished,
    ObservedPhase::Converging,
    ObservedPhase::Failed,
];

fn read(store: &Store) -> Result<Reading, HubError> {
    let jobs = store.list_jobs()?;
    let agents = store.list_agents()?;
    let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    Ok(Reading {
        jobs: PHASES
            .iter()
            .map(|&p| {
                let n = jobs.iter().filter(|j| j.observed.phase == p).count();
                (phase_name(p), count(n))
            })
            .collect(),
        agents: [(AgentState::Live, "live"), (AgentState::Expired, "expired")]
            .iter()
            .map(|&(state, name)| {
                (
                    name,
                    count(agents.iter().filter(|a| a.state == state).count()),
                )
            })
            .collect(),
        outbox: store.outbox_depth()?,
        refused: agents
            .iter()
            .map(|a| {
                (
                    a.agent_id.clone(),
                    a.refused_reports,
                    a.refused_report_items,
                )
            })
            .collect(),
    })
}

impl Collector for Reading {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> std::fmt::Result {
        let mut jobs = encoder.encode_descriptor(
            "weir_hub_jobs",
            "Jobs by observed phase.",
            None,
            MetricType::Gauge,
        )?;
        for (phase, n) in &self.jobs {
            ConstGauge::new(*n).encode(jobs.encode_family(&[("phase", *phase)])?)?;
        }
        let mut agents = encoder.encode_descriptor(
            "weir_hub_agents",
            "Agents by lease state.",
            None,
            MetricType::Gauge,
        )?;
        for (state, n) in &self.agents {
            ConstGauge::new(*n).encode(agents.encode_family(&[("state", *state)])?)?;
        }
        let mut outbox = encoder.encode_descriptor(
            "weir_hub_outbox_commands",
            "Commands in the outbox not yet acknowledged by their Agent, by state.",
            None,
            MetricType::Gauge,
        )?;
        let (pending, claimed) = self.outbox;
        for (state, n) in [("pending", pending), ("claimed", claimed)] {
            let n = i64::try_from(n).unwrap_or(i64::MAX);
            ConstGauge::new(n).encode(outbox.encode_family(&[("state", state)])?)?;
        }
        let mut reports = encoder.encode_descriptor(
            "weir_hub_refused_reports",
            "Reports refused for a stale session or sequence number, per Agent.",
            None,
            MetricType::Counter,
        )?;
        for (agent, n, _) in &self.refused {
            ConstCounter::new(*n).encode(reports.encode_family(&[("agent", agent.as_str())])?)?;
        }
        let mut items = encoder.encode_descriptor(
            "weir_hub_refused_report_items",
            "Report items refused for an old generation, per Agent.",
            None,
            MetricType::Counter,
        )?;
        for (agent, _, n) in &self.refused {
            ConstCounter::new(*n).encode(items.encode_family(&[("agent", agent.as_str())])?)?;
        }
        Ok(())
    }
}

/// `GET /metrics`.
pub(super) async fn metrics(State(hub): State<Arc<Hub>>, _caller: Viewer) -> Response {
    let reading = match hub.with_store(read).await {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    let mut registry = Registry::default();
    registry.register_collector(Box::new(reading));
    let mut text = String::new();
    if let Err(e) = prometheus_client::encoding::text::encode(&mut text, &registry) {
        let source = std::io::Error::other(e.to_string());
        return HubError::Io {
            context: "encoding the metrics".into(),
            source,
        }
        .into_response();
    }
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response()
}
