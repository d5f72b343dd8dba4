//! The Agent's errors.

/// What went wrong in the Agent.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A lane could not be prepared, started or checkpointed.
    #[error("lane {lane} of job `{job}`: {source}")]
    Lane {
        /// The distributed job.
        job: String,
        /// The lane.
        lane: u32,
        /// What the runtime said.
        #[source]
        source: weir::Error,
    },
    /// A lane whose job touches a place outside this Agent's allow-lists (refused before any
    /// I/O).
    #[error(
        "lane {lane} of job `{job}`: `{touch}` is outside this Agent's allow-lists \
         (--allow-path, --allow-url)"
    )]
    NotAllowed {
        /// The distributed job.
        job: String,
        /// The lane.
        lane: u32,
        /// The first place refused.
        touch: String,
    },
    /// A lane whose job keeps its keyed state in a backend this Agent does not offer
    /// (`--state-backends`; refused before it starts).
    #[error(
        "lane {lane} of job `{job}`: this Agent does not offer the `{backend}` state backend \
         (--state-backends)"
    )]
    StateBackendNotOffered {
        /// The distributed job.
        job: String,
        /// The lane.
        lane: u32,
        /// The job's state backend.
        backend: weir::plan::StateBackendKind,
    },
    /// A lane that this Agent does not run.
    #[error("lane {lane} of job `{job}` does not run on this Agent")]
    NoSuchLane {
        /// The distributed job.
        job: String,
        /// The lane.
        lane: u32,
    },
    /// The Hub refused a request for good (the registration itself: a bad id or capabilities
    /// it does not accept).
    #[error("the Hub: {0}")]
    Hub(#[source] weir_control::ControlError),
    /// A lane number outside the job's lanes.
    #[error("lane {lane} of job `{job}` does not exist: the job has {count} lane(s)")]
    LaneOutOfRange {
        /// The distributed job.
        job: String,
        /// The lane asked for.
        lane: u32,
        /// The job's lanes.
        count: u32,
    },
}

/// The Agent's result type.
pub type Result<T> = std::result::Result<T, Error>;
