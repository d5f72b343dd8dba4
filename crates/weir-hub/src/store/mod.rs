//! The Hub's intent store: SQLite through rusqlite, schema migrations from `migrations/`
//! applied by rusqlite_migration.
//!
//! The database runs in WAL mode with `synchronous=FULL`: every committed transaction is on disk
//! before the Hub answers, so an acknowledged generation, session or report sequence survives a
//! power loss, not just a crash of the process (under `NORMAL` a WAL database may lose its last
//! commits on power loss, which would let a report the Hub refused be accepted again). The Hub
//! writes a few small transactions per request, so the extra fsync costs little.
//!
//! One connection behind a mutex serializes the Hub's writes: every check of a generation or a
//! sequence number and the write it guards run in one immediate transaction.

mod agents;
mod detail;
mod jobs;
mod reports;
mod sessions;
mod tokens;
mod upgrades;

pub use reports::PublishTask;
pub use tokens::TokenInfo;

use crate::error::{HubError, Result};
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior};
use rusqlite_migration::{M, Migrations};
use std::path::Path;
use std::sync::Mutex;

/// The schema migrations, in order.
const MIGRATIONS: &[M<'static>] = &[
    M::up(include_str!("../../migrations/01-init.sql")),
    M::up(include_str!("../../migrations/02-auth.sql")),
    M::up(include_str!("../../migrations/03-places.sql")),
    M::up(include_str!("../../migrations/04-evolution.sql")),
];

/// The intent store.
#[derive(Debug)]
pub struct Store {
    conn: Mutex<Connection>,
    lease_ttl_ms: i64,
}

/// Now, in Unix milliseconds.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Unix milliseconds as RFC 3339.
pub fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default()
}

/// A new random id (UUID v4, simple form).
pub fn new_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn to_u32(v: i64) -> u32 {
    u32::try_from(v).unwrap_or(0)
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Decodes JSON the Hub itself stored.
fn from_stored<T: serde::de::DeserializeOwned>(what: &str, text: &str) -> Result<T> {
    serde_json::from_str(text).map_err(|e| HubError::Store {
        context: format!("decoding the stored {what}"),
        source: rusqlite::Error::ToSqlConversionFailure(Box::new(e)),
    })
}

/// Encodes JSON to store.
fn to_stored<T: serde::Serialize>(what: &str, value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(|e| HubError::Store {
        context: format!("encoding the {what}"),
        source: rusqlite::Error::ToSqlConversionFailure(Box::new(e)),
    })
}

impl Store {
    /// Opens (creating if missing) the database at `path` and migrates it to the latest schema;
    /// leases last `lease_ttl_ms`.
    ///
    /// # Errors
    /// [`HubError::Store`] when the file cannot be opened, [`HubError::Migration`] when the
    /// schema cannot be migrated (e.g. a newer Hub wrote it).
    pub fn open(path: &Path, lease_ttl_ms: i64) -> Result<Store> {
        let context = format!("opening {}", path.display());
        owner_only(path).map_err(|source| HubError::Io {
            context: context.clone(),
            source,
        })?;
        let mut conn = Connection::open(path).map_err(HubError::store(context.clone()))?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(HubError::store(context.clone()))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(HubError::Store {
                context: format!("{context}: journal mode is {mode}, not WAL"),
                source: rusqlite::Error::InvalidQuery,
            });
        }
        conn.pragma_update(None, "synchronous", "FULL")
            .and_then(|()| conn.pragma_update(None, "foreign_keys", "ON"))
            .and_then(|()| conn.busy_timeout(std::time::Duration::from_secs(5)))
            .map_err(HubError::store(context))?;
        Migrations::from_slice(MIGRATIONS).to_latest(&mut conn)?;
        Ok(Store {
            conn: Mutex::new(conn),
            lease_ttl_ms,
        })
    }

    /// How long a lease lasts after a heartbeat, in milliseconds.
    pub fn lease_ttl_ms(&self) -> i64 {
        self.lease_ttl_ms
    }

    /// Runs `f` in one immediate transaction, committed when `f` succeeds.
    fn write<T>(&self, context: &str, f: impl FnOnce(&Transaction<'_>) -> Result<T>) -> Result<T> {
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(HubError::store(context))?;
        let out = f(&tx)?;
        tx.commit().map_err(HubError::store(context))?;
        Ok(out)
    }

    /// Runs `f` in a transaction that is committed when `f` succeeds or refuses with a
    /// conflict: a refusal that still counts something (a stale report bumps a counter).
    fn write_always<T>(
        &self,
        context: &str,
        f: impl FnOnce(&Transaction<'_>) -> Result<T>,
    ) -> Result<T> {
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(HubError::store(context))?;
        let out = f(&tx);
        match &out {
            Ok(_) | Err(HubError::Conflict { .. }) => {
                tx.commit().map_err(HubError::store(context))?;
            }
            Err(_) => {}
        }
        out
    }

    /// Runs a read in a (deferred) transaction, so that it sees one snapshot.
    fn read<T>(&self, context: &str, f: impl FnOnce(&Transaction<'_>) -> Result<T>) -> Result<T> {
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let tx = conn.transaction().map_err(HubError::store(context))?;
        f(&tx)
    }
}

/// Creates the database file readable and writable by its owner only (0600), or narrows an
/// existing one (and its WAL and shared-memory files) to that: it holds job secrets. SQLite
/// creates the WAL and shared-memory files with the database file's permissions.
fn owner_only(path: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)?;
        let mut files = vec![path.to_path_buf()];
        for suffix in ["-wal", "-shm"] {
            let mut name = path.as_os_str().to_owned();
            name.push(suffix);
            files.push(name.into());
        }
        for file in files {
            match std::fs::metadata(&file) {
                Ok(meta) if meta.permissions().mode() & 0o077 != 0 => {
                    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600))?;
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// One optional row, with the error wrapped.
fn optional<T>(context: &str, r: rusqlite::Result<T>) -> Result<Option<T>> {
    r.optional().map_err(HubError::store(context))
}
