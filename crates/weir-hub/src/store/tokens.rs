//! API tokens: created (only their hash kept), listed, revoked, and looked up by hash.

use super::{Store, optional, rfc3339};
use crate::auth::{Caller, Role, hash_secret, new_token};
use crate::error::{HubError, Result};
use rusqlite::params;

/// An API token as listings show it: never the token itself.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenInfo {
    /// The token's id (the part after `weir_`).
    pub token_id: String,
    /// The name given at creation (who or what uses it).
    pub name: String,
    /// What it may do.
    pub role: String,
    /// When it was created (RFC 3339).
    pub created_at: String,
    /// When it was revoked (RFC 3339), if it was.
    pub revoked_at: Option<String>,
}

impl Store {
    /// Creates a token with `role`, named `name`; answers its description and the token, which
    /// is shown this once (the store keeps only its hash).
    ///
    /// # Errors
    /// 400 naming `name` for an empty or over-long name; [`HubError::Store`].
    pub fn create_token(&self, name: &str, role: Role, now: i64) -> Result<(TokenInfo, String)> {
        if name.trim().is_empty() || name.len() > 128 {
            return Err(HubError::bad_request(
                "name",
                "expected 1 to 128 characters naming who uses the token",
            ));
        }
        let (token_id, token) = new_token()?;
        let hash = hash_secret(&token);
        self.write("creating a token", |tx| {
            tx.execute(
                "INSERT INTO api_tokens (token_id, name, role, token_hash, created_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![token_id, name, role.as_str(), hash, now],
            )
            .map_err(HubError::store("creating a token"))?;
            Ok(())
        })?;
        let info = TokenInfo {
            token_id,
            name: name.to_owned(),
            role: role.as_str().to_owned(),
            created_at: rfc3339(now),
            revoked_at: None,
        };
        Ok((info, token))
    }

    /// Every token, oldest first.
    ///
    /// # Errors
    /// [`HubError::Store`].
    pub fn list_tokens(&self) -> Result<Vec<TokenInfo>> {
        let context = "listing tokens";
        self.read(context, |tx| {
            let mut stmt = tx
                .prepare(
                    "SELECT token_id, name, role, created_at, revoked_at FROM api_tokens \
                     ORDER BY created_at, token_id",
                )
                .map_err(HubError::store(context))?;
            stmt.query_map([], |r| {
                Ok(TokenInfo {
                    token_id: r.get(0)?,
                    name: r.get(1)?,
                    role: r.get(2)?,
                    created_at: rfc3339(r.get(3)?),
                    revoked_at: r.get::<_, Option<i64>>(4)?.map(rfc3339),
                })
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(HubError::store(context))
        })
    }

    /// Revokes token `token_id`: requests carrying it are refused from now on.
    ///
    /// # Errors
    /// 404 for an unknown token; [`HubError::Store`].
    pub fn revoke_token(&self, token_id: &str, now: i64) -> Result<()> {
        self.write("revoking a token", |tx| {
            let changed = tx
                .execute(
                    "UPDATE api_tokens SET revoked_at = coalesce(revoked_at, ?1) \
                     WHERE token_id = ?2",
                    params![now, token_id],
                )
                .map_err(HubError::store("revoking a token"))?;
            if changed == 0 {
                return Err(HubError::not_found("token", token_id, "tokenId"));
            }
            Ok(())
        })
    }

    /// The unrevoked token whose hash is `hash`, if any.
    ///
    /// # Errors
    /// [`HubError::Store`].
    pub fn token_by_hash(&self, hash: &str) -> Result<Option<Caller>> {
        let context = "checking a token";
        let row = self.read(context, |tx| {
            optional(
                context,
                tx.query_row(
                    "SELECT token_id, name, role FROM api_tokens \
                     WHERE token_hash = ?1 AND revoked_at IS NULL",
                    [hash],
                    |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, String>(1)?,
                            r.get::<_, String>(2)?,
                        ))
                    },
                ),
            )
        })?;
        row.map(|(token_id, name, role)| {
            Ok(Caller {
                token_id,
                name,
                role: Role::parse(&role)?,
            })
        })
        .transpose()
    }
}

#[cfg(test)]
mod tests {
    use crate::auth::{Role, hash_secret};
    use crate::store::Store;

    #[test]
    fn a_token_is_found_by_its_hash_until_it_is_revoked() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("hub.sqlite"), 10_000).unwrap();
        let (info, token) = store.create_token("ci", Role::Operator, 1_000).unwrap();
        assert_eq!(info.role, "operator");
        let found = store.token_by_hash(&hash_secret(&token)).unwrap().unwrap();
        assert_eq!(
            (found.token_id.as_str(), found.role),
            (info.token_id.as_str(), Role::Operator)
        );
        assert!(
            store
                .token_by_hash(&hash_secret("weir_x_y"))
                .unwrap()
                .is_none()
        );
        // Nothing of the token itself is in the database file.
        let db = std::fs::read(dir.path().join("hub.sqlite")).unwrap();
        let wal = std::fs::read(dir.path().join("hub.sqlite-wal")).unwrap_or_default();
        let secret = token.rsplit('_').next().unwrap().as_bytes();
        for bytes in [&db, &wal] {
            assert!(!bytes.windows(secret.len()).any(|w| w == secret));
        }
        store.revoke_token(&info.token_id, 2_000).unwrap();
        assert!(store.token_by_hash(&hash_secret(&token)).unwrap().is_none());
        let listed = store.list_tokens().unwrap();
        assert_eq!(listed.len(), 1);
        assert!(listed[0].revoked_at.is_some());
        assert!(store.revoke_token("nope", 3_000).is_err());
        assert!(store.create_token(" ", Role::Viewer, 1).is_err());
    }
}
