//! The Redis wire of the engine: a connection with its timeouts, the commands that read one
//! key's entries and the decoding of their replies.

use super::keys::StateKeys;
use crate::error::{StateError, StateResult};
use crate::layout::{self, EntryKey};
use redis::{Connection, Value};
use std::collections::HashMap;
use std::time::Duration;
use weir_api::StateKind;

/// How long connecting may take before the task fails.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one command or pipeline may take before the task fails.
pub(crate) const IO_TIMEOUT: Duration = Duration::from_secs(60);
/// Keys read per round trip in ranges and views.
pub(crate) const CHUNK: usize = 256;
/// A connection and what names the server in messages.
pub(crate) struct Link {
    pub(crate) conn: Connection,
    pub(crate) server: String,
}

impl Link {
    pub(crate) fn open(client: &redis::Client, server: &str) -> StateResult<Self> {
        let ctx = "connecting";
        let conn = client
            .get_connection_with_timeout(CONNECT_TIMEOUT)
            .map_err(|e| redis_error(server, ctx, e))?;
        conn.set_read_timeout(Some(IO_TIMEOUT))
            .map_err(|e| redis_error(server, ctx, e))?;
        conn.set_write_timeout(Some(IO_TIMEOUT))
            .map_err(|e| redis_error(server, ctx, e))?;
        Ok(Self {
            conn,
            server: server.to_owned(),
        })
    }

    /// Runs one command.
    pub(crate) fn query<T: redis::FromRedisValue>(
        &mut self,
        cmd: &redis::Cmd,
        context: &str,
    ) -> StateResult<T> {
        cmd.query(&mut self.conn)
            .map_err(|e| redis_error(&self.server, context, e))
    }

    /// Runs a pipeline.
    pub(crate) fn query_pipe<T: redis::FromRedisValue>(
        &mut self,
        pipe: &redis::Pipeline,
        context: &str,
    ) -> StateResult<T> {
        pipe.query(&mut self.conn)
            .map_err(|e| redis_error(&self.server, context, e))
    }
}

pub(crate) fn redis_error(server: &str, context: &str, e: redis::RedisError) -> StateError {
    StateError::Redis {
        server: server.to_owned(),
        context: context.to_owned(),
        source: Box::new(e),
    }
}

/// Whether a state prefix lies in one of the `owned` shard prefixes.
pub(crate) fn owns(owned: &[Vec<u8>], state_prefix: &[u8]) -> bool {
    owned.iter().any(|shard| state_prefix.starts_with(shard))
}

/// The key part (namespace and key, length-prefixed) of an entry key's parts.
pub(crate) fn key_part(parts: &EntryKey<'_>) -> Vec<u8> {
    layout::key_prefix(&[], parts.namespace, parts.key)
}

/// The one-letter kind the journal script takes.
pub(crate) fn kind_letter(kind: StateKind) -> &'static str {
    match kind {
        StateKind::Value => "v",
        StateKind::Map => "m",
        StateKind::List => "l",
        StateKind::Set => "s",
    }
}

/// The empty expiry header: the stored value of a set element without a TTL.
pub(crate) const PLAIN: [u8; layout::EXPIRY_LEN] = [0; layout::EXPIRY_LEN];

/// Queues the commands that read every entry of one key.
pub(crate) fn queue_read(
    pipe: &mut redis::Pipeline,
    kind: StateKind,
    keys: &StateKeys,
    part: &[u8],
) {
    let data = keys.data(part);
    match kind {
        StateKind::Value => pipe.cmd("GET").arg(data),
        StateKind::Map => pipe.cmd("HGETALL").arg(data),
        StateKind::List => pipe.cmd("LRANGE").arg(data).arg(0).arg(-1),
        StateKind::Set => pipe
            .cmd("SMEMBERS")
            .arg(data)
            .cmd("HGETALL")
            .arg(keys.set_values(part)),
    };
}

/// Decodes what [`queue_read`] queued into `(entry key, stored value)` pairs in key order;
/// `replies` yields the pipeline's replies in order.
pub(crate) fn decode_read(
    kind: StateKind,
    key_prefix: &[u8],
    replies: &mut impl Iterator<Item = Value>,
    out: &mut Vec<(Vec<u8>, Vec<u8>)>,
) -> StateResult<()> {
    let mut next = || {
        replies
            .next()
            .ok_or_else(|| StateError::corrupt("a Redis pipeline answered fewer replies"))
    };
    let entry = |sub: &[u8]| [key_prefix, sub].concat();
    let start = out.len();
    match kind {
        StateKind::Value => {
            if let Some(stored) = parse::<Option<Vec<u8>>>(next()?)? {
                out.push((entry(&[]), stored));
            }
        }
        StateKind::Map => {
            for (field, stored) in parse::<Vec<(Vec<u8>, Vec<u8>)>>(next()?)? {
                out.push((entry(&field), stored));
            }
        }
        StateKind::List => {
            for (i, stored) in parse::<Vec<Vec<u8>>>(next()?)?.into_iter().enumerate() {
                out.push((entry(&(i as u64).to_be_bytes()), stored));
            }
        }
        StateKind::Set => {
            let members = parse::<Vec<Vec<u8>>>(next()?)?;
            let values: HashMap<Vec<u8>, Vec<u8>> = parse::<Vec<(Vec<u8>, Vec<u8>)>>(next()?)?
                .into_iter()
                .collect();
            for member in members {
                let stored = values.get(&member).cloned().unwrap_or(PLAIN.to_vec());
                out.push((entry(&member), stored));
            }
        }
    }
    out[start..].sort_unstable_by(|a, b| a.0.cmp(&b.0));
    Ok(())
}

fn parse<T: redis::FromRedisValue>(value: Value) -> StateResult<T> {
    if let Value::ServerError(e) = &value {
        return Err(StateError::corrupt(format!(
            "Redis answered an error: {e:?}"
        )));
    }
    redis::from_redis_value(value)
        .map_err(|e| StateError::corrupt(format!("an unexpected Redis reply: {e}")))
}

/// The URL without its password, for messages.
pub(crate) fn redact(url: &str) -> String {
    match url.split_once('@') {
        Some((_, host)) => format!("redis://…@{host}"),
        None => url.to_owned(),
    }
}
