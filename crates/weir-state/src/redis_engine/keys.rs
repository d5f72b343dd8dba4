//! The Redis key layout of keyed state: which Redis key holds which entries.
//!
//! Every key starts with `{prefix}:{job}`, so jobs never share a key. Under it:
//!
//! ```text
//! {prefix}:{job}:format                                  the state format version
//! {prefix}:{job}:registry                                hash: (operator, state) -> registration JSON
//! {prefix}:{job}:shards                                  set: the (operator, shard, state) that hold keys
//! {prefix}:{job}:index:{op}:{state}:shard:{n}            sorted set: the keys of one state of one shard
//! {prefix}:{job}:state:{op}:{state}:shard:{n}:{key}      the entries of one key (string, hash, list or set)
//! {prefix}:{job}:setvalue:{op}:{state}:shard:{n}:{key}   hash: stored values of set elements with a TTL
//! ```
//!
//! `{op}` and `{state}` are percent-encoded outside `[A-Za-z0-9._-]`, so a `:` in an id cannot
//! make two ids' keys meet. `{key}` is the layout's key part (namespace and key, each
//! length-prefixed: [`crate::layout`]) as raw bytes; the index holds the same bytes with score
//! 0, so `ZRANGEBYLEX` enumerates a state's keys in the layout's order. Registry fields and
//! members of the shards set are the layout's `(job, operator, state)` and state-prefix bytes.

use crate::error::StateResult;
use crate::layout::{self, EntryKey};

/// The key names of one job's namespace.
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    base: String,
}

impl Keys {
    /// The namespace `{prefix}:{job}`.
    pub(crate) fn new(prefix: &str, job: &str) -> Self {
        Self {
            base: format!("{}:{}", escape(prefix), escape(job)),
        }
    }

    /// `{prefix}:{job}`, for messages.
    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    pub(crate) fn format(&self) -> String {
        format!("{}:format", self.base)
    }

    pub(crate) fn registry(&self) -> String {
        format!("{}:registry", self.base)
    }

    pub(crate) fn shards(&self) -> String {
        format!("{}:shards", self.base)
    }

    /// The keys of the state of one shard that a state prefix (`job | operator | shard |
    /// state` of the layout) names.
    pub(crate) fn of_state_prefix(&self, state_prefix: &[u8]) -> StateResult<StateKeys> {
        let (job, operator, shard, state) = layout::decode_state_prefix(state_prefix)?;
        Ok(self.state(&EntryKey {
            job,
            operator,
            shard,
            state,
            namespace: b"",
            key: b"",
            sub_key: b"",
        }))
    }

    /// The keys of one state of one shard, from its parsed entry key (any key part).
    pub(crate) fn state(&self, parts: &EntryKey<'_>) -> StateKeys {
        let tail = format!(
            "{}:{}:shard:{}",
            escape(parts.operator),
            escape(parts.state),
            parts.shard.0
        );
        StateKeys {
            index: format!("{}:index:{tail}", self.base),
            data: format!("{}:state:{tail}:", self.base).into_bytes(),
            set_values: format!("{}:setvalue:{tail}:", self.base).into_bytes(),
        }
    }
}

/// The Redis keys of one state of one shard.
#[derive(Debug, Clone)]
pub(crate) struct StateKeys {
    /// The sorted set of the state's key parts.
    pub(crate) index: String,
    /// The prefix of the data keys (append a key part).
    data: Vec<u8>,
    /// The prefix of the set-value hashes (append a key part).
    set_values: Vec<u8>,
}

impl StateKeys {
    /// The data key of one key part.
    pub(crate) fn data(&self, key_part: &[u8]) -> Vec<u8> {
        [self.data.as_slice(), key_part].concat()
    }

    /// The hash of stored values of a set's elements, for one key part.
    pub(crate) fn set_values(&self, key_part: &[u8]) -> Vec<u8> {
        [self.set_values.as_slice(), key_part].concat()
    }
}

/// Percent-encodes every byte outside `[A-Za-z0-9._-]`.
pub(crate) fn escape(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_api::StateShardId;

    #[test]
    fn ids_with_colons_stay_apart() {
        let keys = Keys::new("weir", "job");
        let parts = |operator, state| EntryKey {
            job: "job",
            operator,
            shard: StateShardId(3),
            state,
            namespace: b"",
            key: b"k",
            sub_key: b"",
        };
        let a = keys.state(&parts("a:b", "c"));
        let b = keys.state(&parts("a", "b:c"));
        assert_ne!(a.index, b.index);
        assert_eq!(a.index, "weir:job:index:a%3Ab:c:shard:3");
        assert_eq!(a.data(b"K"), b"weir:job:state:a%3Ab:c:shard:3:K".to_vec());
        assert_ne!(
            Keys::new("weir", "a:b").base(),
            Keys::new("weir:a", "b").base()
        );
    }
}
