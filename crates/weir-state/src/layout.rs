//! The one key layout of keyed state, byte by byte, and the stored value header.
//!
//! An entry key is the concatenation of, in this order:
//!
//! ```text
//! u32 BE len | job id (UTF-8)
//! u32 BE len | operator id (UTF-8)
//! u32 BE       state shard id
//! u32 BE len | state name (UTF-8)
//! u32 BE len | key namespace (bytes; empty by default)
//! u32 BE len | key (bytes: the operator's current key)
//! sub-key      (rest of the key; empty for value states; the encoded map key, the list
//!               position as u64 BE, or the encoded set element)
//! ```
//!
//! Every component before the sub-key is length-prefixed, so each prefix of components is a
//! prefix of bytes that no other component sequence shares: a redb range scan from
//! `(job, operator, shard)` or `(job, operator, shard, state)` touches exactly that data. The
//! state name comes before the namespace so that one state of one shard (a snapshot segment)
//! is one contiguous range. The shard is fixed width and big-endian so shards sort numerically.
//!
//! A stored value is `u64 BE expiry (epoch ms, 0 = no expiry) | payload`.
//!
//! The registration and size tables are keyed by `u32 BE len | job | u32 BE len | operator |
//! u32 BE len | state`.

use crate::error::{StateError, StateResult};
use weir_api::StateShardId;

/// Width of the expiry header in front of every stored payload.
pub(crate) const EXPIRY_LEN: usize = 8;

/// Appends a length-prefixed component.
fn push(out: &mut Vec<u8>, bytes: &[u8]) {
    // Components longer than 4 GiB cannot reach here: redb limits a key to less than that.
    let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(bytes);
}

/// The bytes shared by every entry of one operator of one job.
pub(crate) fn operator_prefix(job: &str, operator: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + job.len() + operator.len() + 48);
    push(&mut out, job.as_bytes());
    push(&mut out, operator.as_bytes());
    out
}

/// The bytes shared by every entry of one shard of one operator.
pub(crate) fn shard_prefix(job: &str, operator: &str, shard: StateShardId) -> Vec<u8> {
    let mut out = operator_prefix(job, operator);
    out.extend_from_slice(&shard.0.to_be_bytes());
    out
}

/// The bytes shared by every entry of one state of one shard of one operator.
pub(crate) fn state_prefix(job: &str, operator: &str, shard: StateShardId, state: &str) -> Vec<u8> {
    let mut out = shard_prefix(job, operator, shard);
    push(&mut out, state.as_bytes());
    out
}

/// The bytes shared by every entry of one key in one namespace of one state; append a sub-key
/// to get an entry key.
pub(crate) fn key_prefix(state_prefix: &[u8], namespace: &[u8], key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(state_prefix.len() + 8 + namespace.len() + key.len() + 16);
    out.extend_from_slice(state_prefix);
    push(&mut out, namespace);
    push(&mut out, key);
    out
}

/// The first entry key of a namespace in a state: `state_prefix | u32 BE len | namespace`.
///
/// Every entry of a namespace `n` with `(len(n), n) >= (len(ns), ns)` sorts at or after it and
/// every other entry of the state before it, so it is the bound of a namespace range scan.
pub(crate) fn namespace_bound(state_prefix: &[u8], namespace: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(state_prefix.len() + 4 + namespace.len());
    out.extend_from_slice(state_prefix);
    push(&mut out, namespace);
    out
}

/// The smallest byte string above every string that starts with `prefix`, or `None` when there
/// is none (the prefix is all `0xFF`).
pub(crate) fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let last = prefix.iter().rposition(|b| *b != 0xFF)?;
    let mut out = prefix[..=last].to_vec();
    out[last] += 1;
    Some(out)
}

/// Splits the rest of an entry key after its state prefix into `(namespace, key, sub_key)`.
pub(crate) fn split_after_state(rest: &[u8]) -> StateResult<(&[u8], &[u8], &[u8])> {
    let mut rest = rest;
    let namespace = take_component(&mut rest, "namespace")?;
    let key = take_component(&mut rest, "key")?;
    Ok((namespace, key, rest))
}

/// Key of the registration and size tables: `(job, operator, state)`.
pub(crate) fn state_id_key(job: &str, operator: &str, state: &str) -> Vec<u8> {
    let mut out = operator_prefix(job, operator);
    push(&mut out, state.as_bytes());
    out
}

/// The components of an entry key, borrowed from the key bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryKey<'a> {
    /// The job id.
    pub job: &'a str,
    /// The operator id.
    pub operator: &'a str,
    /// The state shard.
    pub shard: StateShardId,
    /// The state name.
    pub state: &'a str,
    /// The key namespace.
    pub namespace: &'a [u8],
    /// The operator's key.
    pub key: &'a [u8],
    /// The sub-key (empty for value states).
    pub sub_key: &'a [u8],
}

impl<'a> EntryKey<'a> {
    /// Parses an entry key written in the layout above.
    ///
    /// # Errors
    ///
    /// [`StateError::Corrupt`] when the bytes do not follow the layout.
    pub fn decode(bytes: &'a [u8]) -> StateResult<Self> {
        let mut rest = bytes;
        let job = take_str(&mut rest, "job id")?;
        let operator = take_str(&mut rest, "operator id")?;
        let shard = StateShardId(take_u32(&mut rest, "shard")?);
        let state = take_str(&mut rest, "state name")?;
        let namespace = take_component(&mut rest, "namespace")?;
        let key = take_component(&mut rest, "key")?;
        Ok(EntryKey {
            job,
            operator,
            shard,
            state,
            namespace,
            key,
            sub_key: rest,
        })
    }

    /// Encodes the components back into an entry key, in one allocation of the exact size.
    pub fn encode(&self) -> Vec<u8> {
        let len = 5 * 4
            + 4
            + self.job.len()
            + self.operator.len()
            + self.state.len()
            + self.namespace.len()
            + self.key.len()
            + self.sub_key.len();
        let mut out = Vec::with_capacity(len);
        push(&mut out, self.job.as_bytes());
        push(&mut out, self.operator.as_bytes());
        out.extend_from_slice(&self.shard.0.to_be_bytes());
        push(&mut out, self.state.as_bytes());
        push(&mut out, self.namespace);
        push(&mut out, self.key);
        out.extend_from_slice(self.sub_key);
        out
    }
}

/// The bytes of an entry key before its sub-key (job, operator, shard, state, namespace and
/// key): what [`key_prefix`] builds for the same components. `None` when the bytes do not
/// follow the layout.
pub(crate) fn key_prefix_of(entry_key: &[u8]) -> Option<&[u8]> {
    let mut rest = entry_key;
    take_component(&mut rest, "job id").ok()?;
    take_component(&mut rest, "operator id").ok()?;
    take_u32(&mut rest, "shard").ok()?;
    for what in ["state name", "namespace", "key"] {
        take_component(&mut rest, what).ok()?;
    }
    Some(&entry_key[..entry_key.len() - rest.len()])
}

/// The components of a state prefix ([`state_prefix`]): `(job, operator, shard, state)`.
pub(crate) fn decode_state_prefix(bytes: &[u8]) -> StateResult<(&str, &str, StateShardId, &str)> {
    let mut rest = bytes;
    let job = take_str(&mut rest, "job id")?;
    let operator = take_str(&mut rest, "operator id")?;
    let shard = StateShardId(take_u32(&mut rest, "shard")?);
    let state = take_str(&mut rest, "state name")?;
    if !rest.is_empty() {
        return Err(StateError::corrupt(
            "a state prefix runs on past its state name",
        ));
    }
    Ok((job, operator, shard, state))
}

fn take_u32(rest: &mut &[u8], what: &str) -> StateResult<u32> {
    let Some((head, tail)) = rest.split_first_chunk::<4>() else {
        return Err(StateError::corrupt(format!(
            "entry key ends inside the {what}"
        )));
    };
    *rest = tail;
    Ok(u32::from_be_bytes(*head))
}

fn take_component<'a>(rest: &mut &'a [u8], what: &str) -> StateResult<&'a [u8]> {
    let len = take_u32(rest, what)? as usize;
    if rest.len() < len {
        return Err(StateError::corrupt(format!(
            "entry key announces a {what} of {len} bytes but has {} left",
            rest.len()
        )));
    }
    let (head, tail) = rest.split_at(len);
    *rest = tail;
    Ok(head)
}

fn take_str<'a>(rest: &mut &'a [u8], what: &str) -> StateResult<&'a str> {
    let bytes = take_component(rest, what)?;
    std::str::from_utf8(bytes)
        .map_err(|_| StateError::corrupt(format!("the {what} of an entry key is not UTF-8")))
}

/// Builds a stored value: expiry header, then payload.
pub(crate) fn encode_stored(expiry_ms: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(EXPIRY_LEN + payload.len());
    out.extend_from_slice(&expiry_ms.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// Splits a stored value into its expiry (`0` = none) and payload.
pub(crate) fn decode_stored(stored: &[u8]) -> StateResult<(u64, &[u8])> {
    match stored.split_first_chunk::<EXPIRY_LEN>() {
        Some((head, payload)) => Ok((u64::from_be_bytes(*head), payload)),
        None => Err(StateError::corrupt(format!(
            "stored value of {} bytes is shorter than its expiry header",
            stored.len()
        ))),
    }
}

/// Whether an entry with this expiry is dead at `now_ms`.
pub(crate) fn is_expired(expiry_ms: u64, now_ms: u64) -> bool {
    expiry_ms != 0 && expiry_ms <= now_ms
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_pinned_byte_by_byte() {
        let key = EntryKey {
            job: "j",
            operator: "op",
            shard: StateShardId(258),
            state: "s",
            namespace: b"",
            key: b"k",
            sub_key: b"\x07",
        };
        let bytes = key.encode();
        let expected: Vec<u8> = [
            &[0, 0, 0, 1][..],
            b"j",
            &[0, 0, 0, 2],
            b"op",
            &[0, 0, 1, 2],
            &[0, 0, 0, 1],
            b"s",
            &[0, 0, 0, 0],
            &[0, 0, 0, 1],
            b"k",
            &[7],
        ]
        .concat();
        assert_eq!(bytes, expected);
        assert_eq!(EntryKey::decode(&bytes).ok(), Some(key));
    }

    #[test]
    fn prefixes_do_not_capture_neighbours() {
        // "op" must not be a prefix of "op2"'s data, nor shard 1 of shard 256's.
        let a = shard_prefix("j", "op", StateShardId(1));
        let b = state_prefix("j", "op2", StateShardId(1), "s");
        let c = state_prefix("j", "op", StateShardId(256), "s");
        assert!(!b.starts_with(&operator_prefix("j", "op")));
        assert!(!c.starts_with(&a));
        assert!(state_prefix("j", "op", StateShardId(1), "s").starts_with(&a));
    }

    #[test]
    fn namespace_bounds_order_by_length_then_bytes() {
        let prefix = state_prefix("j", "op", StateShardId(3), "s");
        let entry = |ns: &[u8]| key_prefix(&prefix, ns, b"k");
        assert!(entry(b"\xFF") < namespace_bound(&prefix, b"\x00\x00"));
        assert!(entry(b"\x00\x00") >= namespace_bound(&prefix, b"\x00\x00"));
        assert!(entry(b"\x00\x01") >= namespace_bound(&prefix, b"\x00\x00"));
        assert!(entry(b"\x00\x01") < namespace_bound(&prefix, b"\x00\x02"));
        let end = prefix_successor(&prefix).expect("successor");
        assert!(entry(&[0xFF; 40]) < end);
        assert!(state_prefix("j", "op", StateShardId(3), "t") >= end);
        assert_eq!(prefix_successor(&[1, 0xFF, 0xFF]), Some(vec![2]));
        assert_eq!(prefix_successor(&[0xFF]), None);
    }

    #[test]
    fn truncated_keys_are_corrupt_not_panics() {
        let bytes = state_prefix("job", "op", StateShardId(0), "s");
        for cut in 0..bytes.len() {
            assert!(EntryKey::decode(&bytes[..cut]).is_err());
        }
        assert!(decode_stored(&[1, 2, 3]).is_err());
    }
}
