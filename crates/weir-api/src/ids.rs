//! Stable identities (docs/architecture.md, "Stable ids"): newtypes so that ids never travel as bare strings or integers.

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Wraps an id string; callers validate the characters where ids come from users.
            pub fn new(id: impl Into<String>) -> Self {
                Self(id.into())
            }

            /// The id as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self(s.to_owned())
            }
        }
    };
}

string_id!(
    /// Logical job id, stable across restarts.
    JobId
);
string_id!(
    /// Stable pipeline lineage id, stable across restarts and redeployments of the same lineage.
    PipelineId
);
string_id!(
    /// Stable operator id: explicit uid > canonical model path > structural hash; routes state.
    OperatorId
);
string_id!(
    /// Stable id of a job vertex (a chain of operators); equal to the chain head's operator id.
    VertexId
);
string_id!(
    /// Stable id of an edge between two operators.
    EdgeId
);

/// Index of one parallel instance of a vertex, `0 <= subtask < parallelism`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default,
)]
#[serde(transparent)]
pub struct SubtaskIndex(pub u32);

impl fmt::Display for SubtaskIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Logical state shard of a keyed vertex, `0 <= shard < stateShardCount`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default,
)]
#[serde(transparent)]
pub struct StateShardId(pub u32);

/// Checkpoint epoch number; epochs only increase.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default,
)]
#[serde(transparent)]
pub struct Epoch(pub u64);

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Event time in milliseconds since the Unix epoch (negative before 1970).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default,
)]
#[serde(transparent)]
pub struct EventTimeMs(pub i64);

impl EventTimeMs {
    /// The smallest event time: a watermark here holds nothing back.
    pub const MIN: EventTimeMs = EventTimeMs(i64::MIN);
    /// The largest event time: a watermark here means the input has ended.
    pub const MAX: EventTimeMs = EventTimeMs(i64::MAX);
}

/// Stable task identity `job/pipeline/vertex/subtask` used for checkpoint ACKs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TaskId {
    /// The job.
    pub job: JobId,
    /// The pipeline lineage.
    pub pipeline: PipelineId,
    /// The vertex.
    pub vertex: VertexId,
    /// The parallel instance.
    pub subtask: SubtaskIndex,
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}/{}/{}",
            self.job, self.pipeline, self.vertex, self.subtask
        )
    }
}

/// Stable channel identity `edgeId/upstreamSubtask/downstreamSubtask/channelIndex`.
///
/// `channel_index` is the channel's position in the downstream subtask's ordered input list, the
/// unit of barrier alignment and watermark merging.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChannelId {
    /// The edge the channel belongs to.
    pub edge: EdgeId,
    /// Sending subtask of the upstream vertex.
    pub upstream: SubtaskIndex,
    /// Receiving subtask of the downstream vertex.
    pub downstream: SubtaskIndex,
    /// Position in the receiving subtask's input list.
    pub channel_index: u32,
}

impl fmt::Display for ChannelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}/{}/{}",
            self.edge, self.upstream, self.downstream, self.channel_index
        )
    }
}
