//! Who may call what: API tokens with roles, the join token Agents register with, and the
//! hashing that keeps every secret out of the store.
//!
//! A token is `weir_<id>_<secret>`: 64 hex digits of randomness behind a short id that names it
//! in listings and logs. The store keeps only its SHA-256 (a token is a random 256-bit value, so
//! a fast hash is enough: there is nothing to guess), and looks a presented token up by that
//! hash. Roles are ordered: a viewer reads, an operator also starts, stops, checkpoints and
//! savepoints jobs, an admin also submits, validates and upgrades them.

use crate::Hub;
use crate::error::{HubError, Result};
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// What a token may do; each role may do everything the roles before it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Reads jobs, Agents, metrics, checkpoints and manifests.
    Viewer,
    /// Also starts, stops, checkpoints and savepoints jobs.
    Operator,
    /// Also validates, submits, upgrades and rolls back jobs.
    Admin,
}

impl Role {
    /// The role's name, as the CLI and the store spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }

    /// The role named `name`.
    ///
    /// # Errors
    /// [`HubError::BadRequest`] naming `role` for any other name.
    pub fn parse(name: &str) -> Result<Role> {
        match name {
            "viewer" => Ok(Role::Viewer),
            "operator" => Ok(Role::Operator),
            "admin" => Ok(Role::Admin),
            other => Err(HubError::bad_request(
                "role",
                format!(
                    "`{}`: expected viewer, operator or admin",
                    weir::api::excerpt(other)
                ),
            )),
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The SHA-256 of `secret`, in hex: what the store keeps of a token or credential.
pub fn hash_secret(secret: &str) -> String {
    weir::plan::sha256_hex(secret.as_bytes())
}

/// `n` random bytes from the operating system, in hex.
///
/// # Errors
/// [`HubError::Io`] when the system's random source fails.
pub fn random_hex(n: usize) -> Result<String> {
    let mut bytes = vec![0u8; n];
    getrandom::fill(&mut bytes).map_err(|e| HubError::Io {
        context: "reading the system's random source".into(),
        source: std::io::Error::other(e.to_string()),
    })?;
    Ok(hex::encode(bytes))
}

/// A new API token: its id and the token itself (`weir_<id>_<secret>`).
///
/// # Errors
/// As [`random_hex`].
pub fn new_token() -> Result<(String, String)> {
    let id = random_hex(6)?;
    let secret = random_hex(32)?;
    let token = format!("weir_{id}_{secret}");
    Ok((id, token))
}

/// The bearer token of a request, if it carries one.
pub(crate) fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

/// A caller whose token was checked: the token's id, name and role.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The token's id (the part of the token that is not secret).
    pub token_id: String,
    /// The name given at creation.
    pub name: String,
    /// What it may do.
    pub role: Role,
}

/// Checks that the request's token exists, is not revoked and has at least role `need`.
async fn authorize(parts: &Parts, hub: &Arc<Hub>, need: Role) -> Result<Caller> {
    let Some(token) = bearer_token(&parts.headers) else {
        return Err(HubError::Unauthorized(
            "Authorization: expected `Bearer <token>`; create one with `weir hub token create`"
                .into(),
        ));
    };
    let hash = hash_secret(token);
    let caller = hub.with_store(move |s| s.token_by_hash(&hash)).await?;
    let Some(caller) = caller else {
        return Err(HubError::Unauthorized(
            "Authorization: the token is unknown or revoked".into(),
        ));
    };
    if caller.role < need {
        tracing::warn!(
            token = %caller.token_id,
            role = %caller.role,
            method = %parts.method,
            path = %parts.uri.path(),
            "refused: the token's role is too weak"
        );
        return Err(HubError::Forbidden(format!(
            "token `{}` has role {}; {} {} needs role {need} or higher",
            caller.token_id,
            caller.role,
            parts.method,
            parts.uri.path()
        )));
    }
    Ok(caller)
}

macro_rules! role_extractor {
    ($name:ident, $role:expr, $doc:literal) => {
        #[doc = $doc]
        #[derive(Debug)]
        pub(crate) struct $name(#[allow(dead_code)] pub Caller);

        impl FromRequestParts<Arc<Hub>> for $name {
            type Rejection = HubError;

            async fn from_request_parts(
                parts: &mut Parts,
                hub: &Arc<Hub>,
            ) -> std::result::Result<Self, Self::Rejection> {
                authorize(parts, hub, $role).await.map($name)
            }
        }
    };
}

role_extractor!(
    Viewer,
    Role::Viewer,
    "A request whose token has at least the viewer role (a handler argument)."
);
role_extractor!(
    Operator,
    Role::Operator,
    "A request whose token has at least the operator role (a handler argument)."
);
role_extractor!(
    Admin,
    Role::Admin,
    "A request whose token has the admin role (a handler argument)."
);

/// Compares two secrets in time that depends only on their lengths, so that response times do
/// not reveal how much of a guessed secret is right.
pub(crate) fn same_secret(a: &str, b: &str) -> bool {
    bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_and_only_their_hash_is_kept() {
        let (id, token) = new_token().unwrap();
        let (other_id, other) = new_token().unwrap();
        assert_ne!(token, other);
        assert_ne!(id, other_id);
        assert!(token.starts_with(&format!("weir_{id}_")));
        assert_eq!(token.len(), "weir_".len() + 12 + 1 + 64);
        let hash = hash_secret(&token);
        assert_eq!(hash.len(), 64);
        assert!(!hash.contains(&token[17..]));
        // SHA-256 of "abc" (FIPS 180-2's example).
        assert_eq!(
            hash_secret("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn roles_are_ordered_and_parsed() {
        assert!(Role::Viewer < Role::Operator && Role::Operator < Role::Admin);
        for role in [Role::Viewer, Role::Operator, Role::Admin] {
            assert_eq!(Role::parse(role.as_str()).unwrap(), role);
        }
        assert!(Role::parse("root").is_err());
    }

    #[test]
    fn bearer_tokens_are_read_from_the_header() {
        let mut headers = HeaderMap::new();
        assert_eq!(bearer_token(&headers), None);
        headers.insert(header::AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(bearer_token(&headers), None);
        headers.insert(header::AUTHORIZATION, "Bearer  weir_x ".parse().unwrap());
        assert_eq!(bearer_token(&headers), Some("weir_x"));
    }
}
