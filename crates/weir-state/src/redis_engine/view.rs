//! Reading ranges of a Redis namespace: one state's keys in layout order, and the
//! point-in-time views snapshots read.

use super::keys::{Keys, StateKeys};
use super::wire::{CHUNK, Link, decode_read, owns, queue_read};
use crate::engine::{EntryIter, StateSize, ViewSource, decode_spec};
use crate::error::{StateError, StateResult};
use crate::layout;
use redis::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use weir_api::{JobId, OperatorId, StateKind, StateSpec};

/// The connection a range reads through: the engine's own, or a view's.
pub(crate) enum LinkRef<'a> {
    Engine(&'a mut Link),
    View(&'a Mutex<Link>),
}

impl LinkRef<'_> {
    fn with<T>(&mut self, f: impl FnOnce(&mut Link) -> StateResult<T>) -> StateResult<T> {
        match self {
            LinkRef::Engine(link) => f(link),
            LinkRef::View(link) => {
                let mut guard = link.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                f(&mut guard)
            }
        }
    }
}

/// The entries of one state of one shard with keys in `[start, end)`, read lazily: a chunk of
/// the index (`ZRANGEBYLEX`), then those keys' entries in one pipeline.
pub(crate) struct StateRange<'a> {
    link: LinkRef<'a>,
    keys: StateKeys,
    kind: StateKind,
    state_prefix: Vec<u8>,
    /// The lower bound of the next index read (`[x` inclusive, `(x` exclusive).
    from: Vec<u8>,
    /// The upper bound (`(x`, or `+`).
    until: Vec<u8>,
    start: Vec<u8>,
    end: Option<Vec<u8>>,
    buffer: VecDeque<(Vec<u8>, Vec<u8>)>,
    done: bool,
}

impl<'a> StateRange<'a> {
    /// The range `[start, end)` of the state under `state_prefix` (`end: None`: to its end).
    pub(crate) fn over(
        link: LinkRef<'a>,
        keys: StateKeys,
        kind: StateKind,
        state_prefix: Vec<u8>,
        start: &[u8],
        end: Option<&[u8]>,
    ) -> Self {
        let rest = |bound: &[u8]| bound.get(state_prefix.len()..).unwrap_or_default().to_vec();
        // A bound at or before the state's first key reads from its start; a bound outside
        // the state (its successor) reads to its end.
        let from = if start.len() > state_prefix.len() && start.starts_with(&state_prefix) {
            [b"[".as_slice(), &rest(start)].concat()
        } else {
            b"-".to_vec()
        };
        let until = match end {
            Some(end) if end.len() > state_prefix.len() && end.starts_with(&state_prefix) => {
                [b"(".as_slice(), &rest(end)].concat()
            }
            _ => b"+".to_vec(),
        };
        Self {
            link,
            keys,
            kind,
            state_prefix,
            from,
            until,
            start: start.to_vec(),
            end: end.map(<[u8]>::to_vec),
            buffer: VecDeque::new(),
            done: false,
        }
    }

    /// Reads the next chunk of keys into the buffer; `false` when the index is exhausted.
    fn fill(&mut self) -> StateResult<bool> {
        let ctx = "scanning state";
        let (index, from, until) = (&self.keys.index, &self.from, &self.until);
        let members: Vec<Vec<u8>> = self.link.with(|link| {
            link.query(
                redis::cmd("ZRANGEBYLEX")
                    .arg(index)
                    .arg(from.as_slice())
                    .arg(until.as_slice())
                    .arg("LIMIT")
                    .arg(0)
                    .arg(CHUNK),
                ctx,
            )
        })?;
        let Some(last) = members.last() else {
            return Ok(false);
        };
        self.from = [b"(".as_slice(), last].concat();
        let mut pipe = redis::pipe();
        for member in &members {
            queue_read(&mut pipe, self.kind, &self.keys, member);
        }
        let replies: Vec<Value> = self.link.with(|link| link.query_pipe(&pipe, ctx))?;
        let mut replies = replies.into_iter();
        let mut out = Vec::new();
        for member in &members {
            let key_prefix = [self.state_prefix.as_slice(), member].concat();
            decode_read(self.kind, &key_prefix, &mut replies, &mut out)?;
        }
        let (start, end) = (&self.start, &self.end);
        self.buffer.extend(out.into_iter().filter(|(key, _)| {
            key.as_slice() >= start.as_slice() && end.as_ref().is_none_or(|end| key < end)
        }));
        Ok(members.len() == CHUNK)
    }
}

impl Iterator for StateRange<'_> {
    type Item = StateResult<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(entry) = self.buffer.pop_front() {
                return Some(Ok(entry));
            }
            if self.done {
                return None;
            }
            match self.fill() {
                Ok(more) => self.done = !more,
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

/// A point-in-time view of a job's namespace: the registry and shard list read when it was
/// taken, the data read through a connection of its own. While it lives the backend writes
/// nothing to Redis (it holds a token the engine counts).
pub(crate) struct RedisView {
    link: Mutex<Link>,
    keys: Keys,
    /// Registrations by `(job, operator, state)` key.
    specs: HashMap<Vec<u8>, StateSpec>,
    /// The state prefixes (operator, shard, state) of the task's shards that hold keys, in
    /// layout order.
    states: Vec<Vec<u8>>,
    _token: Arc<()>,
}

impl RedisView {
    pub(crate) fn new(
        mut link: Link,
        keys: Keys,
        owned: &[Vec<u8>],
        token: Arc<()>,
    ) -> StateResult<Self> {
        let ctx = "starting a read view";
        let registry: Vec<(Vec<u8>, Vec<u8>)> =
            link.query(redis::cmd("HGETALL").arg(keys.registry()), ctx)?;
        let specs = registry
            .into_iter()
            .map(|(id, json)| Ok((id, decode_spec(&json, "")?)))
            .collect::<StateResult<HashMap<_, _>>>()?;
        let mut states: Vec<Vec<u8>> =
            link.query(redis::cmd("SMEMBERS").arg(keys.shards()), ctx)?;
        states.retain(|state| owns(owned, state));
        states.sort_unstable();
        Ok(Self {
            link: Mutex::new(link),
            keys,
            specs,
            states,
            _token: token,
        })
    }

    /// A range over one whole state of one shard.
    fn state_range(&self, state_prefix: &[u8]) -> StateResult<StateRange<'_>> {
        let (job, operator, _, state) = layout::decode_state_prefix(state_prefix)?;
        let kind = self
            .specs
            .get(&layout::state_id_key(job, operator, state))
            .map(|spec| spec.kind)
            .ok_or_else(|| {
                StateError::corrupt(format!(
                    "operator `{operator}` holds entries of unregistered state `{state}`"
                ))
            })?;
        let keys = self.keys.of_state_prefix(state_prefix)?;
        Ok(StateRange::over(
            LinkRef::View(&self.link),
            keys,
            kind,
            state_prefix.to_vec(),
            state_prefix,
            None,
        ))
    }
}

impl ViewSource for RedisView {
    fn scan(&self, prefix: Vec<u8>) -> StateResult<EntryIter<'_>> {
        let mut ranges = Vec::new();
        for state_prefix in &self.states {
            if state_prefix.starts_with(&prefix) {
                ranges.push(self.state_range(state_prefix)?);
            } else if prefix.starts_with(state_prefix) {
                let mut range = self.state_range(state_prefix)?;
                let end = layout::prefix_successor(&prefix);
                range = StateRange::over(
                    range.link,
                    range.keys,
                    range.kind,
                    state_prefix.clone(),
                    &prefix,
                    end.as_deref(),
                );
                ranges.push(range);
            }
        }
        Ok(Box::new(ranges.into_iter().flatten()))
    }

    fn registered_states(&self, job: &JobId, operator: &OperatorId) -> StateResult<Vec<StateSpec>> {
        let prefix = layout::operator_prefix(job.as_str(), operator.as_str());
        let mut found: Vec<(&Vec<u8>, &StateSpec)> = self
            .specs
            .iter()
            .filter(|(id, _)| id.starts_with(&prefix))
            .collect();
        found.sort_unstable_by(|a, b| a.0.cmp(b.0));
        Ok(found.into_iter().map(|(_, spec)| spec.clone()).collect())
    }

    fn state_size(
        &self,
        job: &JobId,
        operator: &OperatorId,
        state: &str,
    ) -> StateResult<StateSize> {
        crate::view::size_of_state(
            self.scan(layout::operator_prefix(job.as_str(), operator.as_str()))?,
            state,
        )
    }

    fn scan_all(&self) -> StateResult<EntryIter<'_>> {
        self.scan(Vec::new())
    }
}
