//! The Redis engine: a task's committed keyed state in a Redis server, under the job's
//! namespace, in native Redis types (the key layout is in [`keys`]).
//!
//! A value state's entry is a string, a map state's key a hash (field: the encoded map key),
//! a list state's key a list, a set state's key a set (member: the encoded element). Every
//! stored value keeps the layout's expiry header, so TTL means exactly what it means on redb;
//! keys of a state with a TTL also get a Redis expiry of the TTL plus a second after their
//! last write, so Redis drops keys that went quiet (never before their entries' deadlines).
//!
//! The state API is synchronous (a read answers before the operator goes on), so the engine
//! uses the blocking client: a read is one round trip; a journal write is one pipeline of one
//! script call per key, and a range reads the state's index and then its keys in chunks.
//!
//! Snapshots: a view reads Redis through a connection of its own. While a view lives, the
//! backend keeps committed outcomes in its journal instead of writing them, so the view sees
//! Redis as of the barrier.

mod keys;
mod view;
mod wire;

use crate::engine::{
    Engine, EntryIter, STATE_FORMAT_VERSION, SyncFn, ViewSource, decode_spec, encode_spec,
};
use crate::error::{StateError, StateResult};
use crate::journal::Staged;
use crate::layout::{self, EntryKey};
use keys::{Keys, StateKeys};
use redis::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use view::RedisView;
use weir_api::{JobId, OperatorId, StateKind, StateShardId, StateSpec};
use wire::{
    Link, PLAIN, decode_read, key_part, kind_letter, owns, queue_read, redact, redis_error,
};

/// Where a Redis state backend keeps its state.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisConfig {
    /// The server: `redis://[user@]host[:port][/db]`.
    pub url: String,
    /// The first component of every key (default [`DEFAULT_REDIS_PREFIX`]).
    pub prefix: String,
    /// The server's password (`AUTH`), if it has one.
    pub password: Option<String>,
}

impl std::fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConfig")
            .field("url", &redact(&self.url))
            .field("prefix", &self.prefix)
            .field(
                "password",
                &self.password.as_ref().map(|_| weir_api::secrets::REDACTED),
            )
            .finish()
    }
}

/// The key prefix when none is configured.
pub const DEFAULT_REDIS_PREFIX: &str = "weir";

impl RedisConfig {
    /// A configuration with the default prefix.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            prefix: DEFAULT_REDIS_PREFIX.to_owned(),
            password: None,
        }
    }

    /// The same server, reached with `password`.
    pub fn with_password(mut self, password: impl Into<String>) -> Self {
        self.password = Some(password.into());
        self
    }

    /// The same server with another key prefix.
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }
}

/// Keys written per pipeline of a journal write.
const WRITE_CHUNK: usize = 1024;
/// Added to a state's TTL for the Redis expiry of its keys.
const EXPIRY_MARGIN_MS: u64 = 1_000;

const APPLY_SCRIPT: &str = include_str!("apply.lua");

/// One task's view of its job's namespace in Redis.
pub(crate) struct RedisEngine {
    client: redis::Client,
    link: Link,
    keys: Keys,
    job: String,
    /// Registrations read or written, by `(job, operator, state)` key.
    specs: HashMap<Vec<u8>, StateSpec>,
    /// The shard prefixes (job, operator, shard) this task owns: the only ones it clears and
    /// its views read (other tasks of the job keep theirs in the same namespace).
    owned: Vec<Vec<u8>>,
    /// Held by every live view: while another holder exists, writes wait in the journal.
    views: Arc<()>,
    apply_sha: String,
}

impl RedisEngine {
    /// Connects, checks the namespace's format version, loads the journal-write script and
    /// clears the state of the `(operator, shard)` pairs the task owns.
    pub(crate) fn connect(
        config: &RedisConfig,
        job: &JobId,
        owned: &[(OperatorId, StateShardId)],
    ) -> StateResult<Self> {
        let url_error = |e| {
            redis_error(
                &redact(&config.url),
                "reading the URL of `state.redis.url`",
                e,
            )
        };
        let mut info = redis::IntoConnectionInfo::into_connection_info(config.url.as_str())
            .map_err(url_error)?;
        if let Some(password) = &config.password {
            let settings = info.redis_settings().clone().set_password(password);
            info = info.set_redis_settings(settings);
        }
        let client = redis::Client::open(info).map_err(url_error)?;
        let server = client.get_connection_info().addr().to_string();
        let mut link = Link::open(&client, &server)?;
        let keys = Keys::new(&config.prefix, job.as_str());
        let format: Option<u32> = link.query(
            redis::cmd("SET")
                .arg(keys.format())
                .arg(STATE_FORMAT_VERSION)
                .arg("NX")
                .arg("GET"),
            "checking the state format version",
        )?;
        if let Some(found) = format
            && found != STATE_FORMAT_VERSION
        {
            return Err(StateError::FormatVersion {
                path: format!("redis://{server}/{}", keys.base()).into(),
                found,
                expected: STATE_FORMAT_VERSION,
            });
        }
        let apply_sha: String = link.query(
            redis::cmd("SCRIPT").arg("LOAD").arg(APPLY_SCRIPT),
            "loading the journal script",
        )?;
        let owned = owned
            .iter()
            .map(|(operator, shard)| layout::shard_prefix(job.as_str(), operator.as_str(), *shard))
            .collect();
        let mut engine = Self {
            client,
            link,
            keys,
            job: job.as_str().to_owned(),
            specs: HashMap::new(),
            owned,
            views: Arc::new(()),
            apply_sha,
        };
        engine.clear_owned()?;
        Ok(engine)
    }

    /// Removes every key of the shards the task owns: their data, their indexes and their
    /// entries in the job's shard set.
    fn clear_owned(&mut self) -> StateResult<()> {
        let members: Vec<Vec<u8>> = self.link.query(
            redis::cmd("SMEMBERS").arg(self.keys.shards()),
            "listing state shards",
        )?;
        for member in members {
            if owns(&self.owned, &member) {
                self.clear_state(&member)?;
            }
        }
        Ok(())
    }

    /// Deletes every key of one state of one shard and its index.
    fn clear_state(&mut self, state_prefix: &[u8]) -> StateResult<()> {
        let ctx = "clearing a state shard";
        let keys = self.state_keys(state_prefix)?;
        loop {
            let members: Vec<Vec<u8>> = self.link.query(
                redis::cmd("ZRANGE")
                    .arg(&keys.index)
                    .arg(0)
                    .arg(WRITE_CHUNK - 1),
                ctx,
            )?;
            if members.is_empty() {
                break;
            }
            let mut pipe = redis::pipe();
            for member in &members {
                pipe.cmd("DEL")
                    .arg(keys.data(member))
                    .arg(keys.set_values(member))
                    .ignore();
                pipe.cmd("ZREM").arg(&keys.index).arg(member).ignore();
            }
            self.link.query_pipe::<()>(&pipe, ctx)?;
        }
        self.link.query::<()>(
            redis::cmd("SREM").arg(self.keys.shards()).arg(state_prefix),
            ctx,
        )
    }

    fn state_keys(&self, state_prefix: &[u8]) -> StateResult<StateKeys> {
        self.check_job(layout::decode_state_prefix(state_prefix)?.0)?;
        self.keys.of_state_prefix(state_prefix)
    }

    fn check_job(&self, job: &str) -> StateResult<()> {
        if job == self.job {
            Ok(())
        } else {
            Err(StateError::corrupt(format!(
                "the Redis state of job `{}` was asked for an entry of job `{job}`",
                self.job
            )))
        }
    }

    /// The registration of a state, read from Redis the first time.
    fn spec(&mut self, job: &str, operator: &str, state: &str) -> StateResult<&StateSpec> {
        let id = layout::state_id_key(job, operator, state);
        if !self.specs.contains_key(&id) {
            let found = self.registration(job, operator, state)?.ok_or_else(|| {
                StateError::UnknownState {
                    operator: operator.to_owned(),
                    state: state.to_owned(),
                }
            })?;
            self.specs.insert(id.clone(), found);
        }
        self.specs
            .get(&id)
            .ok_or_else(|| StateError::corrupt("a registration vanished"))
    }

    /// The kind of the state an entry key (parsed) belongs to.
    fn kind_of(&mut self, parts: &EntryKey<'_>) -> StateResult<StateKind> {
        self.check_job(parts.job)?;
        Ok(self.spec(parts.job, parts.operator, parts.state)?.kind)
    }
}

impl Engine for RedisEngine {
    fn describe(&self) -> String {
        format!("redis://{}/{}", self.link.server, self.keys.base())
    }

    fn get(&mut self, key: &[u8]) -> StateResult<Option<Vec<u8>>> {
        let parts = EntryKey::decode(key)?;
        let kind = self.kind_of(&parts)?;
        let keys = self.keys.state(&parts);
        let data = keys.data(&key_part(&parts));
        let ctx = "reading state";
        match kind {
            StateKind::Value if parts.sub_key.is_empty() => {
                self.link.query(redis::cmd("GET").arg(data), ctx)
            }
            StateKind::Value => Ok(None),
            StateKind::Map => self
                .link
                .query(redis::cmd("HGET").arg(data).arg(parts.sub_key), ctx),
            StateKind::List => {
                let Ok(position) = <[u8; 8]>::try_from(parts.sub_key) else {
                    return Ok(None);
                };
                let position = u64::from_be_bytes(position);
                if position > i64::MAX as u64 {
                    return Ok(None);
                }
                self.link
                    .query(redis::cmd("LINDEX").arg(data).arg(position), ctx)
            }
            StateKind::Set => {
                let mut pipe = redis::pipe();
                pipe.cmd("SISMEMBER").arg(&data).arg(parts.sub_key);
                pipe.cmd("HGET")
                    .arg(keys.set_values(&key_part(&parts)))
                    .arg(parts.sub_key);
                let (member, stored): (bool, Option<Vec<u8>>) = self.link.query_pipe(&pipe, ctx)?;
                Ok(member.then(|| stored.unwrap_or(PLAIN.to_vec())))
            }
        }
    }

    fn key_entries(&mut self, key_prefix: &[u8]) -> StateResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let parts = EntryKey::decode(key_prefix)?;
        let kind = self.kind_of(&parts)?;
        let keys = self.keys.state(&parts);
        let mut pipe = redis::pipe();
        queue_read(&mut pipe, kind, &keys, &key_part(&parts));
        let replies: Vec<Value> = self.link.query_pipe(&pipe, "reading state")?;
        let mut out = Vec::new();
        decode_read(kind, key_prefix, &mut replies.into_iter(), &mut out)?;
        Ok(out)
    }

    fn range<'a>(
        &'a mut self,
        state_prefix: &[u8],
        start: &[u8],
        end: Option<&[u8]>,
    ) -> StateResult<EntryIter<'a>> {
        let (job, operator, _, state) = layout::decode_state_prefix(state_prefix)?;
        self.check_job(job)?;
        let kind = self.spec(job, operator, state)?.kind;
        let keys = self.state_keys(state_prefix)?;
        Ok(Box::new(view::StateRange::over(
            view::LinkRef::Engine(&mut self.link),
            keys,
            kind,
            state_prefix.to_vec(),
            start,
            end,
        )))
    }

    fn apply(&mut self, staged: &BTreeMap<Vec<u8>, Staged>) -> StateResult<()> {
        let ctx = "committing the journal";
        let mut pipe = redis::pipe();
        let mut queued = 0usize;
        let mut iter = staged.iter().peekable();
        while let Some(&(first, _)) = iter.peek() {
            let parts = EntryKey::decode(first)?;
            self.check_job(parts.job)?;
            let spec = self.spec(parts.job, parts.operator, parts.state)?;
            let (kind, spec_ttl) = (spec.kind, spec.ttl_ms);
            let keys = self.keys.state(&parts);
            let part = key_part(&parts);
            let state_prefix =
                layout::state_prefix(parts.job, parts.operator, parts.shard, parts.state);
            let key_prefix = [state_prefix.as_slice(), &part].concat();
            let call = pipe
                .cmd("EVALSHA")
                .arg(&self.apply_sha)
                .arg(4)
                .arg(keys.data(&part))
                .arg(&keys.index)
                .arg(keys.set_values(&part))
                .arg(self.keys.shards())
                .arg(kind_letter(kind))
                .arg(&part)
                .arg(&state_prefix)
                .arg(spec_ttl.map_or(0, |ttl| ttl.saturating_add(EXPIRY_MARGIN_MS)));
            let mut ops = 0;
            // Key prefixes are length-prefixed, so no other key's prefix starts with this one.
            while let Some((key, outcome)) = iter.next_if(|(k, _)| k.starts_with(&key_prefix)) {
                let sub = &key[key_prefix.len()..];
                match outcome {
                    Staged::Put(stored) => call.arg("p").arg(sub).arg(stored.as_slice()),
                    Staged::Delete | Staged::Absent => call.arg("d").arg(sub).arg(""),
                };
                ops += 1;
            }
            call.ignore();
            if ops == 0 {
                return Err(StateError::corrupt("a journal key outside the layout"));
            }
            queued += 1;
            if queued >= WRITE_CHUNK {
                self.link.query_pipe::<()>(&pipe, ctx)?;
                pipe = redis::pipe();
                queued = 0;
            }
        }
        if queued > 0 {
            self.link.query_pipe::<()>(&pipe, ctx)?;
        }
        Ok(())
    }

    fn registration(
        &mut self,
        job: &str,
        operator: &str,
        state: &str,
    ) -> StateResult<Option<StateSpec>> {
        self.check_job(job)?;
        let id = layout::state_id_key(job, operator, state);
        let found: Option<Vec<u8>> = self.link.query(
            redis::cmd("HGET").arg(self.keys.registry()).arg(&id),
            "reading a state registration",
        )?;
        let found = found.map(|json| decode_spec(&json, state)).transpose()?;
        if let Some(spec) = &found {
            self.specs.insert(id, spec.clone());
        }
        Ok(found)
    }

    fn put_registration(&mut self, job: &str, operator: &str, spec: &StateSpec) -> StateResult<()> {
        self.check_job(job)?;
        let id = layout::state_id_key(job, operator, &spec.name);
        self.link.query::<()>(
            redis::cmd("HSET")
                .arg(self.keys.registry())
                .arg(&id)
                .arg(encode_spec(spec)?),
            "registering a state",
        )?;
        self.specs.insert(id, spec.clone());
        Ok(())
    }

    fn replace_state(
        &mut self,
        state_prefix: &[u8],
        entries: &[(Vec<u8>, Vec<u8>)],
    ) -> StateResult<()> {
        self.clear_state(state_prefix)?;
        let puts: BTreeMap<Vec<u8>, Staged> = entries
            .iter()
            .map(|(key, stored)| (key.clone(), Staged::Put(stored.clone())))
            .collect();
        self.apply(&puts)
    }

    fn view(&mut self) -> StateResult<Box<dyn ViewSource>> {
        let link = Link::open(&self.client, &self.link.server)?;
        Ok(Box::new(RedisView::new(
            link,
            self.keys.clone(),
            &self.owned,
            Arc::clone(&self.views),
        )?))
    }

    fn needs_sync(&self) -> bool {
        false
    }

    fn durable(&mut self) -> StateResult<Option<SyncFn>> {
        // Durability is the server's (its persistence settings); recovery never needs more.
        Ok(None)
    }

    fn writes_paused(&self) -> bool {
        Arc::strong_count(&self.views) > 1
    }

    fn flush_on_close(&self) -> bool {
        false
    }
}
