//! Weir's Agent: the data plane of distributed jobs. A Hub assigns it lanes of jobs; it runs
//! each lane with the same runtime as `weir run` ([`lanes`]), takes their checkpoints when the
//! Hub asks, and reports what they do.
//!
//! A distributed job runs as `count` independent lanes: lane `i` is the job's spec run as a job
//! of its own (id `<job>-lane-<i>`, parallelism 1) that reads share `i` of every source's
//! splits. Lanes exchange no data; each checkpoints, restores and commits its sinks on its own.

mod agent;
mod error;
pub mod lanes;
pub mod readings;

pub use agent::{AgentConfig, run_agent, run_agent_with_metrics};
pub use error::{Error, Result};
pub use lanes::{LaneEnd, LaneId, LaneProbe, LaneProbes, Lanes, lane_job_id, lane_spec};
