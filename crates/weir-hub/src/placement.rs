//! Placement of lanes on Agents: only on live Agents that can run the job (compatible with the
//! Hub, offering the job's state backend, with allow-lists that take every place it touches),
//! spread (fewest lanes first, ties by Agent id), never over an Agent's slots; a lane is never
//! split. A lane no Agent takes waits, with the reason.

use crate::compile::{incompatibilities, offers_state_backend, refused_touch};
use weir::plan::StateBackendKind;
use weir_control::AgentCapabilities;

/// An Agent that can take lanes, with what it already runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentLoad {
    /// The Agent.
    pub agent_id: String,
    /// Its `slots` capability.
    pub slots: u32,
    /// Lanes already placed on it (current generations of every job).
    pub lanes: u32,
}

/// Places each of `lanes` on the Agent with the fewest lanes (ties by Agent id) that has a free
/// slot; a lane no Agent has room for gets `None` and waits. `agents` is updated with the new
/// load.
pub fn place(lanes: &[u32], agents: &mut [AgentLoad]) -> Vec<(u32, Option<String>)> {
    lanes
        .iter()
        .map(|&lane| {
            let target = agents
                .iter_mut()
                .filter(|a| a.lanes < a.slots)
                .min_by(|a, b| {
                    a.lanes
                        .cmp(&b.lanes)
                        .then_with(|| a.agent_id.cmp(&b.agent_id))
                });
            match target {
                Some(agent) => {
                    agent.lanes += 1;
                    (lane, Some(agent.agent_id.clone()))
                }
                None => (lane, None),
            }
        })
        .collect()
}

/// What a job asks of the Agents its lanes run on, besides a free slot.
#[derive(Debug, Clone, Copy)]
pub struct JobNeeds<'a> {
    /// The job's keyed-state backend (its spec's `state.backend`).
    pub state_backend: StateBackendKind,
    /// Every place the job touches, for the Agents' allow-lists.
    pub touches: &'a [weir::api::Touch],
}

/// A live Agent as placement sees it.
#[derive(Debug, Clone)]
pub struct LiveAgent {
    /// The Agent.
    pub agent_id: String,
    /// What it declared at registration.
    pub capabilities: AgentCapabilities,
    /// Lanes already placed on it (current generations of running jobs).
    pub lanes: u32,
}

/// The Agents a job's lanes may go to, and why a lane that finds no slot among them waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidates {
    /// The Agents that can run the job, with their load.
    pub loads: Vec<AgentLoad>,
    /// Why a lane [`place`] leaves unplaced waits: the first requirement no live Agent meets,
    /// or no free slot.
    pub wait_cause: String,
}

/// The live `agents` that can run a job with `needs`: compatible with the Hub, offering its
/// state backend, and with allow-lists (if any) taking every place it touches. When none is
/// left, the wait cause names the first of these requirements that no Agent met.
pub fn candidates(agents: Vec<LiveAgent>, needs: JobNeeds<'_>) -> Candidates {
    let live = agents.len();
    let backend = needs.state_backend;
    let (compatible, incompatible): (Vec<_>, Vec<_>) = agents
        .into_iter()
        .partition(|a| incompatibilities(&a.capabilities).is_empty());
    let with_backend: Vec<_> = compatible
        .iter()
        .filter(|a| offers_state_backend(&a.capabilities, backend))
        .cloned()
        .collect();
    let mut refused_place = None;
    let allowed: Vec<_> = with_backend
        .iter()
        .filter(|a| match refused_touch(&a.capabilities, needs.touches) {
            Some(touch) => {
                refused_place.get_or_insert_with(|| (a.agent_id.clone(), touch.to_string()));
                false
            }
            None => true,
        })
        .cloned()
        .collect();
    let wait_cause = if live == 0 {
        "no live Agent".to_owned()
    } else if let (true, Some(a)) = (compatible.is_empty(), incompatible.first()) {
        format!(
            "none of the {live} live Agent(s) can run this Hub's jobs (Agent `{}`: {})",
            a.agent_id,
            incompatibilities(&a.capabilities).join("; ")
        )
    } else if with_backend.is_empty() {
        format!(
            "no live Agent offers the `{backend}` state backend (an Agent offers it with \
             `weir agent --state-backends redb,{backend}`)"
        )
    } else if let (true, Some((agent, touch))) = (allowed.is_empty(), refused_place) {
        format!(
            "no live Agent that offers the `{backend}` state backend allows every place the \
             job touches (Agent `{agent}`: `{touch}` is outside its allow-lists)"
        )
    } else {
        let slots: u64 = allowed
            .iter()
            .map(|a| u64::from(a.capabilities.slots))
            .sum();
        format!(
            "no free slot: the {} live Agent(s) that can run the job have {slots} slot(s), all \
             taken",
            allowed.len()
        )
    };
    Candidates {
        loads: allowed
            .into_iter()
            .map(|a| AgentLoad {
                agent_id: a.agent_id,
                slots: a.capabilities.slots,
                lanes: a.lanes,
            })
            .collect(),
        wait_cause,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(id: &str, slots: u32, lanes: u32) -> AgentLoad {
        AgentLoad {
            agent_id: id.into(),
            slots,
            lanes,
        }
    }

    #[test]
    fn lanes_spread_fewest_first_ties_by_id() {
        let mut agents = vec![agent("b", 4, 0), agent("a", 4, 0), agent("c", 4, 1)];
        let placed = place(&[0, 1, 2, 3], &mut agents);
        let on: Vec<_> = placed.iter().map(|(_, a)| a.as_deref()).collect();
        assert_eq!(on, [Some("a"), Some("b"), Some("a"), Some("b")]);
        assert_eq!(agents[2].lanes, 1);
    }

    #[test]
    fn no_agent_goes_over_its_slots_and_the_rest_wait() {
        let mut agents = vec![agent("a", 1, 0), agent("b", 2, 1)];
        let placed = place(&[0, 1, 2], &mut agents);
        assert_eq!(
            placed,
            [(0, Some("a".into())), (1, Some("b".into())), (2, None)]
        );
    }

    fn live(id: &str, backends: &[&str], lanes: u32) -> LiveAgent {
        LiveAgent {
            agent_id: id.into(),
            capabilities: AgentCapabilities {
                runtime_version: weir_control::RUNTIME_VERSION.into(),
                state_backends: backends.iter().map(|b| (*b).to_owned()).collect(),
                checkpoint_protocol: weir_control::CHECKPOINT_PROTOCOL,
                slots: 1,
                allow: None,
            },
            lanes,
        }
    }

    fn needs(state_backend: StateBackendKind) -> JobNeeds<'static> {
        JobNeeds {
            state_backend,
            touches: &[],
        }
    }

    #[test]
    fn only_agents_offering_the_jobs_state_backend_are_candidates() {
        let agents = || vec![live("a", &["redb"], 0), live("b", &["redb", "redis"], 0)];
        let redb = candidates(agents(), needs(StateBackendKind::Redb));
        assert_eq!(redb.loads.len(), 2);
        let redis = candidates(agents(), needs(StateBackendKind::Redis));
        let ids: Vec<_> = redis.loads.iter().map(|l| l.agent_id.as_str()).collect();
        assert_eq!(ids, ["b"]);
        let none = candidates(
            vec![live("a", &["redb"], 0)],
            needs(StateBackendKind::Redis),
        );
        assert!(none.loads.is_empty());
        assert!(
            none.wait_cause
                .starts_with("no live Agent offers the `redis` state backend"),
            "{}",
            none.wait_cause
        );
    }

    #[test]
    fn the_wait_cause_names_what_no_agent_meets() {
        let empty = candidates(Vec::new(), needs(StateBackendKind::Redb));
        assert_eq!(empty.wait_cause, "no live Agent");
        let mut old = live("a", &["redb", "redis"], 0);
        old.capabilities.runtime_version = "0.0.0".into();
        let old = candidates(vec![old], needs(StateBackendKind::Redis));
        assert!(
            old.wait_cause.contains("can run this Hub's jobs") && old.wait_cause.contains("0.0.0"),
            "{}",
            old.wait_cause
        );
        let full = candidates(vec![live("a", &["redb"], 1)], needs(StateBackendKind::Redb));
        assert_eq!(full.loads.len(), 1);
        assert!(
            full.wait_cause.starts_with("no free slot"),
            "{}",
            full.wait_cause
        );
    }
}
