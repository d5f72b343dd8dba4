-- The Hub's intent store, version 1. Times are Unix milliseconds.

-- Agents and their current session and lease.
CREATE TABLE agents (
    agent_id TEXT PRIMARY KEY,
    boot_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    session_token TEXT NOT NULL,
    capabilities TEXT NOT NULL,          -- AgentCapabilities as JSON
    state TEXT NOT NULL CHECK (state IN ('live', 'expired')),
    lease_expires_at INTEGER NOT NULL,
    registered_at INTEGER NOT NULL,
    refused_report_items INTEGER NOT NULL DEFAULT 0,
    refused_reports INTEGER NOT NULL DEFAULT 0
);

-- Every session an Agent started; reports are sequenced per session.
CREATE TABLE agent_sessions (
    session_id TEXT PRIMARY KEY,
    agent_id TEXT NOT NULL REFERENCES agents (agent_id),
    boot_id TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    last_seq INTEGER,                    -- NULL until the first report is accepted
    ended_at INTEGER
);

CREATE TABLE jobs (
    job_id TEXT PRIMARY KEY,
    desired_state TEXT NOT NULL CHECK (desired_state IN ('stopped', 'running')),
    generation INTEGER NOT NULL,
    current_version TEXT NOT NULL,
    has_run INTEGER NOT NULL DEFAULT 0,  -- 1 once started: later starts restore `latest`
    restore_epochs TEXT,                 -- lane -> epoch JSON the next start restores (upgrades)
    generation_restore TEXT NOT NULL DEFAULT '"none"', -- the Restore JSON of the current generation
    last_checkpoint_at INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL
);

-- Versions are immutable: the trigger below refuses updates.
CREATE TABLE job_versions (
    version_id TEXT PRIMARY KEY,
    job_id TEXT NOT NULL REFERENCES jobs (job_id),
    number INTEGER NOT NULL,
    source_sql TEXT,
    source_spec TEXT,
    spec_json TEXT NOT NULL,
    plans_json TEXT NOT NULL,
    plan_fingerprint TEXT NOT NULL,
    state_format_version INTEGER NOT NULL,
    lanes INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    UNIQUE (job_id, number)
);
CREATE TRIGGER job_versions_are_immutable BEFORE UPDATE ON job_versions
BEGIN
    SELECT RAISE(ABORT, 'job versions are immutable');
END;

-- Which Agent runs which lane of which generation, and what it reported.
CREATE TABLE assignments (
    job_id TEXT NOT NULL REFERENCES jobs (job_id),
    generation INTEGER NOT NULL,
    lane INTEGER NOT NULL,
    agent_id TEXT REFERENCES agents (agent_id),   -- NULL: waiting for a free slot
    state TEXT NOT NULL,                         -- pending, starting, running, stopped, finished, failed, lost
    cause TEXT,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (job_id, generation, lane)
);

-- Job-level checkpoints and savepoints asked for, and the lane epochs reported against them.
CREATE TABLE checkpoints (
    checkpoint_id TEXT PRIMARY KEY,
    job_id TEXT NOT NULL REFERENCES jobs (job_id),
    version_id TEXT NOT NULL REFERENCES job_versions (version_id),
    generation INTEGER NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('checkpoint', 'savepoint')),
    savepoint_name TEXT,
    lanes INTEGER NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'publishing', 'completed', 'abandoned')),
    created_at INTEGER NOT NULL
);
CREATE TABLE lane_checkpoints (
    checkpoint_id TEXT NOT NULL REFERENCES checkpoints (checkpoint_id),
    lane INTEGER NOT NULL,
    epoch INTEGER NOT NULL,
    reported_at INTEGER NOT NULL,
    PRIMARY KEY (checkpoint_id, lane)
);

-- Completed job-level checkpoints: what a restore or an upgrade starts from.
CREATE TABLE recovery_records (
    checkpoint_id TEXT PRIMARY KEY REFERENCES checkpoints (checkpoint_id),
    job_id TEXT NOT NULL REFERENCES jobs (job_id),
    version_id TEXT NOT NULL REFERENCES job_versions (version_id),
    generation INTEGER NOT NULL,
    kind TEXT NOT NULL,
    savepoint_name TEXT,
    state_format_version INTEGER NOT NULL,
    lane_epochs TEXT NOT NULL,           -- lane -> epoch JSON
    manifest_path TEXT NOT NULL,
    checksum TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    completed_at INTEGER NOT NULL
);

-- Commands for Agents: pending until claimed by a poll, re-delivered until acknowledged,
-- superseded when their job moves to a newer generation.
CREATE TABLE outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    command_id TEXT NOT NULL UNIQUE,
    agent_id TEXT NOT NULL REFERENCES agents (agent_id),
    job_id TEXT NOT NULL REFERENCES jobs (job_id),
    version_id TEXT NOT NULL,
    generation INTEGER NOT NULL,
    action TEXT NOT NULL,                -- CommandAction JSON
    state TEXT NOT NULL CHECK (state IN ('pending', 'claimed', 'acked', 'superseded')),
    created_at INTEGER NOT NULL,
    claimed_at INTEGER,
    acked_at INTEGER,
    outcome TEXT
);
CREATE INDEX outbox_by_agent ON outbox (agent_id, state);

CREATE TABLE upgrades (
    upgrade_id TEXT PRIMARY KEY,
    job_id TEXT NOT NULL REFERENCES jobs (job_id),
    from_version TEXT NOT NULL REFERENCES job_versions (version_id),
    to_version TEXT NOT NULL REFERENCES job_versions (version_id),
    savepoint_id TEXT NOT NULL REFERENCES recovery_records (checkpoint_id),
    state TEXT NOT NULL CHECK (state IN ('applied', 'rolledBack')),
    created_at INTEGER NOT NULL
);
