//! The observed state of a job, aggregated over the lanes of its current generation.

use weir_control::{DesiredState, ObservedPhase, ObservedState};

/// A lane of the current generation, as the aggregation sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneView {
    /// The lane.
    pub lane: u32,
    /// Its Agent (`None`: waiting for an Agent that can take it).
    pub agent_id: Option<String>,
    /// `pending`, `lost`, or what the Agent reported.
    pub state: String,
    /// The reported cause; for a lane waiting for an Agent, why none takes it.
    pub cause: Option<String>,
}

/// Aggregates the lanes: `failed` with the first terminally failed lane as root cause;
/// otherwise `running`/`stopped`/`finished` only when every lane reports it, `converging` while
/// any lane is pending, starting, lost or on its way to the desired state, with the wait cause
/// of the first lane that waits for an Agent (no live Agent, none offers the job's state
/// backend, no free slot...). A lane in trouble never hides the others: each lane is listed in
/// the job's detail.
pub fn aggregate(desired: DesiredState, lanes: &[LaneView]) -> ObservedState {
    if let Some(failed) = lanes.iter().find(|l| l.state == "failed") {
        let agent = failed.agent_id.as_deref().unwrap_or("no Agent");
        let cause = failed.cause.as_deref().unwrap_or("no cause reported");
        return ObservedState {
            phase: ObservedPhase::Failed,
            cause: Some(format!("lane {} on `{agent}`: {cause}", failed.lane)),
        };
    }
    let all = |states: &[&str]| lanes.iter().all(|l| states.contains(&l.state.as_str()));
    let phase = match desired {
        DesiredState::Stopped if all(&["stopped", "finished"]) => ObservedPhase::Stopped,
        DesiredState::Running if !lanes.is_empty() && all(&["finished"]) => ObservedPhase::Finished,
        DesiredState::Running if !lanes.is_empty() && all(&["running", "finished"]) => {
            ObservedPhase::Running
        }
        _ => ObservedPhase::Converging,
    };
    let cause = (phase == ObservedPhase::Converging)
        .then(|| {
            lanes
                .iter()
                .find(|l| l.agent_id.is_none() && l.state == "pending")
                .and_then(|l| {
                    let cause = l.cause.as_deref()?;
                    Some(format!("lane {} waits for an Agent: {cause}", l.lane))
                })
        })
        .flatten();
    ObservedState { phase, cause }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lane(lane: u32, state: &str) -> LaneView {
        LaneView {
            lane,
            agent_id: Some(format!("a{lane}")),
            state: state.into(),
            cause: (state == "failed").then(|| "disk full".to_owned()),
        }
    }

    #[test]
    fn running_only_when_every_lane_runs() {
        let running = [lane(0, "running"), lane(1, "running")];
        assert_eq!(
            aggregate(DesiredState::Running, &running).phase,
            ObservedPhase::Running
        );
        let one_pending = [lane(0, "running"), lane(1, "pending")];
        assert_eq!(
            aggregate(DesiredState::Running, &one_pending).phase,
            ObservedPhase::Converging
        );
    }

    #[test]
    fn a_failed_lane_names_the_root_cause() {
        let state = aggregate(
            DesiredState::Running,
            &[lane(0, "running"), lane(1, "failed"), lane(2, "pending")],
        );
        assert_eq!(state.phase, ObservedPhase::Failed);
        assert_eq!(state.cause.as_deref(), Some("lane 1 on `a1`: disk full"));
    }

    #[test]
    fn a_lane_waiting_for_an_agent_names_why() {
        let waiting = LaneView {
            lane: 1,
            agent_id: None,
            state: "pending".into(),
            cause: Some("no live Agent offers the `redis` state backend".into()),
        };
        let state = aggregate(DesiredState::Running, &[lane(0, "running"), waiting]);
        assert_eq!(state.phase, ObservedPhase::Converging);
        assert_eq!(
            state.cause.as_deref(),
            Some("lane 1 waits for an Agent: no live Agent offers the `redis` state backend")
        );
    }

    #[test]
    fn a_job_that_never_ran_is_stopped() {
        assert_eq!(
            aggregate(DesiredState::Stopped, &[]).phase,
            ObservedPhase::Stopped
        );
        assert_eq!(
            aggregate(DesiredState::Running, &[]).phase,
            ObservedPhase::Converging
        );
    }
}
