-- API tokens of users and tools. Only the SHA-256 of a token is kept: the token itself is shown
-- once, when it is created.
CREATE TABLE api_tokens (
    token_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    token_hash TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
);

-- An Agent id belongs to the credential of its first registration (kept as its SHA-256): a
-- registration with another credential is a takeover attempt and is refused.
ALTER TABLE agents ADD COLUMN credential_hash TEXT NOT NULL DEFAULT '';

-- Session tokens are kept hashed from now on; the sessions issued in clear end here (their
-- Agents register again).
UPDATE agents SET session_token = '';
