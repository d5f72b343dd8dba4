//! State an operator keeps in its own memory instead of in a [`KeyedStateStore`]: at a barrier
//! it hands the checkpoint a [`StateImage`], and a restored instance gets the rows back through
//! [`TaskContext::restored_image`].
//!
//! Window operators aggregate in memory; mirroring every group into the keyed-state store at
//! each barrier cost more than the aggregation itself. An image is encoded off the task's thread
//! (the closure runs after the barrier was forwarded) and written as Parquet segments with the
//! shard of every row, so a restore at another parallelism still hands each subtask the rows of
//! the shards it owns.
//!
//! [`KeyedStateStore`]: crate::KeyedStateStore
//! [`TaskContext::restored_image`]: crate::TaskContext::restored_image

use crate::error::Result;
use crate::state::StateSpec;
use arrow::array::{BinaryArray, UInt32Array};

/// The entries of one state of an in-memory operator, one row per entry: the state shard of the
/// entry's key, its namespace, its key and its payload (all in the operator's own encoding).
#[derive(Debug, Clone)]
pub struct StateRows {
    /// The state (name and schema version; kind and TTL are not used for images).
    pub spec: StateSpec,
    /// The state shard of each row; a restored subtask gets only rows of shards it owns.
    pub shards: UInt32Array,
    /// The namespace of each row (e.g. the window).
    pub namespaces: BinaryArray,
    /// The key of each row (empty for operator-wide values).
    pub keys: BinaryArray,
    /// The value of each row.
    pub payloads: BinaryArray,
}

impl StateRows {
    /// Number of rows.
    pub fn len(&self) -> usize {
        self.shards.len()
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.shards.is_empty()
    }
}

/// The state of an in-memory operator at a barrier, not encoded yet: a closure over an immutable
/// copy of the state (Arrow arrays are reference counted, so copies are cheap) that produces its
/// rows. The runtime calls it on a background thread while the task goes on processing input.
pub struct StateImage(Box<dyn FnOnce() -> Result<Vec<StateRows>> + Send>);

impl StateImage {
    /// An image whose rows `encode` produces.
    pub fn new(encode: impl FnOnce() -> Result<Vec<StateRows>> + Send + 'static) -> Self {
        StateImage(Box::new(encode))
    }

    /// Produces the rows, one [`StateRows`] per state.
    ///
    /// # Errors
    /// The operator's encoding errors.
    pub fn encode(self) -> Result<Vec<StateRows>> {
        (self.0)()
    }
}

impl std::fmt::Debug for StateImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateImage")
    }
}
