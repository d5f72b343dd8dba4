//! Agent sessions: a bearer token checked against an Agent's current session.

use super::optional;
use crate::auth::{hash_secret, same_secret};
use crate::error::{HubError, Result};
use rusqlite::Transaction;

/// The current session of an Agent, checked against a bearer token.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    pub session_id: String,
}

/// Checks that `token` is the current session of live Agent `agent_id` (the store keeps the
/// session token's hash).
pub(crate) fn authenticate(tx: &Transaction<'_>, agent_id: &str, token: &str) -> Result<Session> {
    let row = optional(
        "authenticating an agent",
        tx.query_row(
            "SELECT session_id, session_token, state FROM agents WHERE agent_id = ?1",
            [agent_id],
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                ))
            },
        ),
    )?;
    let Some((session_id, current, state)) = row else {
        return Err(HubError::not_found("agent", agent_id, "agentId"));
    };
    if !same_secret(&current, &hash_secret(token)) {
        return Err(HubError::conflict(
            "Authorization",
            format!(
                "stale session: the token is not Agent `{agent_id}`'s current session; register again"
            ),
        ));
    }
    if state != "live" {
        return Err(HubError::conflict(
            "Authorization",
            format!(
                "stale session: Agent `{agent_id}`'s lease lapsed and its lanes moved; register again"
            ),
        ));
    }
    Ok(Session { session_id })
}
