//! State retention of the updating operators (`state_ttl`, SQL's `table.exec.state.ttl`).
//!
//! A key's state that is neither read nor written for the TTL (processing time, the state
//! backend's clock) expires: it reads as absent, so the key starts afresh, and the backend
//! purges it. docs/sql.md ("State retention") says what that means for results.

use weir_api::DurationMs;
use weir_api::state::{StateDescriptor, StateType};

/// The descriptor of state `name`, with `ttl` when one is set.
pub(crate) fn descriptor<K: StateType>(name: &str, ttl: Option<DurationMs>) -> StateDescriptor<K> {
    let descriptor = StateDescriptor::<K>::new(name);
    match ttl {
        Some(ttl) => descriptor.with_ttl(std::time::Duration::from_millis(ttl.0)),
        None => descriptor,
    }
}
