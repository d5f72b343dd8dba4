//! Placement of lanes on Agents: spread (fewest lanes first, ties by Agent id), never over an
//! Agent's slots; a lane is never split.

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
}
