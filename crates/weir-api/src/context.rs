//! What a running operator, source reader or sink writer knows about where it runs.

use crate::ids::{JobId, OperatorId, SubtaskIndex};

/// Identity of one parallel instance of an operator, handed to it when it is created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskContext {
    /// The job.
    pub job_id: JobId,
    /// The operator this instance belongs to.
    pub operator_id: OperatorId,
    /// This instance's index.
    pub subtask: SubtaskIndex,
    /// How many instances the operator has.
    pub parallelism: u32,
}

impl TaskContext {
    /// A short label for logs and error messages: `operator[subtask/parallelism]`.
    pub fn label(&self) -> String {
        format!(
            "{}[{}/{}]",
            self.operator_id, self.subtask, self.parallelism
        )
    }
}
