//! Tests of the cross-key namespace scan and the explicitly addressed reads and writes.

use crate::{ManualClock, OperatorStore, StateBackend, StateError};
use std::collections::BTreeMap;
use std::sync::Arc;
use weir_api::state::{Map, NamespaceRange, Value};
use weir_api::{
    JobId, KeyedStateStore, OperatorId, ScannedEntry, StateAddress, StateDescriptor, StateShardId,
    StateSpec,
};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn open(dir: &std::path::Path, clock: &ManualClock) -> StateBackend {
    StateBackend::open_redb(&dir.join("t.redb"), Arc::new(clock.clone())).expect("open")
}

fn store(backend: &StateBackend, op: &str) -> OperatorStore {
    backend.keyed_store(&JobId::new("job"), &OperatorId::new(op))
}

fn value_spec(name: &str) -> StateSpec {
    StateDescriptor::<Value<u64>>::new(name).spec().clone()
}

fn at<'a>(shard: u32, namespace: &'a [u8], key: &'a [u8]) -> StateAddress<'a> {
    StateAddress {
        shard: StateShardId(shard),
        namespace,
        key,
    }
}

fn entry(namespace: &[u8], key: &[u8], sub_key: &[u8], payload: &[u8]) -> ScannedEntry {
    ScannedEntry {
        namespace: namespace.to_vec(),
        key: key.to_vec(),
        sub_key: sub_key.to_vec(),
        payload: payload.to_vec(),
    }
}

fn ts(t: u64) -> [u8; 8] {
    t.to_be_bytes()
}

#[test]
fn scan_reads_one_state_of_one_shard_in_layout_order_with_staged_changes() -> TestResult {
    let dir = tempfile::tempdir()?;
    let backend = open(dir.path(), &ManualClock::new(0));
    let mut s = store(&backend, "op");
    let mut neighbour = store(&backend, "op2");
    for name in ["win", "other"] {
        s.register(&value_spec(name))?;
        neighbour.register(&value_spec(name))?;
    }
    // Committed: three windows of two keys in shard 1, plus data that must not show up.
    s.put_at("win", at(1, &ts(300), b"a"), b"", b"a300")?;
    s.put_at("win", at(1, &ts(5), b"b"), b"", b"b5")?;
    s.put_at("win", at(1, &ts(5), b"a"), b"", b"a5")?;
    s.put_at("win", at(1, &ts(70), b"a"), b"", b"a70")?;
    s.put_at("win", at(2, &ts(5), b"a"), b"", b"other shard")?;
    s.put_at("other", at(1, &ts(5), b"a"), b"", b"other state")?;
    neighbour.put_at("win", at(1, &ts(5), b"a"), b"", b"other operator")?;
    backend.commit()?;
    // Staged: one overwrite, one removal, one new entry.
    s.put_at("win", at(1, &ts(5), b"b"), b"", b"b5'")?;
    assert!(s.remove_at("win", at(1, &ts(70), b"a"), b"")?);
    s.put_at("win", at(1, &ts(6), b"c"), b"", b"c6")?;

    s.set_current_key(b"current", StateShardId(9));
    s.set_current_namespace(b"mine");
    s.put("win", b"", b"own")?;

    let all = s.scan("win", StateShardId(1), NamespaceRange::ALL, None)?;
    assert_eq!(
        all,
        vec![
            entry(&ts(5), b"a", b"", b"a5"),
            entry(&ts(5), b"b", b"", b"b5'"),
            entry(&ts(6), b"c", b"", b"c6"),
            entry(&ts(300), b"a", b"", b"a300"),
        ]
    );
    let from_6 = s.scan(
        "win",
        StateShardId(1),
        NamespaceRange::new(&ts(6), Some(&ts(300))),
        None,
    )?;
    assert_eq!(from_6, vec![entry(&ts(6), b"c", b"", b"c6")]);
    let first = s.scan("win", StateShardId(1), NamespaceRange::ALL, Some(1))?;
    assert_eq!(first, all[..1]);
    assert_eq!(
        s.scan("win", StateShardId(1), NamespaceRange::ALL, Some(3))?,
        all[..3]
    );
    assert!(
        s.scan("win", StateShardId(1), NamespaceRange::ALL, Some(0))?
            .is_empty()
    );
    // Empty and inverted ranges are empty, not errors.
    for (from, until) in [(ts(6), ts(6)), (ts(300), ts(5))] {
        let range = NamespaceRange::new(&from, Some(&until));
        assert!(s.scan("win", StateShardId(1), range, None)?.is_empty());
    }
    // The 4-byte namespace "mine" sorts before every 8-byte one, and after every 3-byte one.
    let shard9 = s.scan(
        "win",
        StateShardId(9),
        NamespaceRange::new(&[0xFF; 3], Some(&[0; 8])),
        None,
    )?;
    assert_eq!(shard9, vec![entry(b"mine", b"current", b"", b"own")]);

    // The scan left the current key and namespace alone.
    assert_eq!(s.get("win", b"")?, Some(b"own".to_vec()));
    assert_eq!(
        s.get_at("win", at(1, &ts(5), b"b"), b"")?,
        Some(b"b5'".to_vec())
    );
    assert_eq!(s.get_at("win", at(1, &ts(70), b"a"), b"")?, None);

    let err = s
        .scan("unregistered", StateShardId(1), NamespaceRange::ALL, None)
        .err()
        .ok_or("an unregistered state was scanned")?;
    assert!(err.to_string().contains("before it is registered"), "{err}");
    Ok(())
}

#[test]
fn scan_skips_expired_entries_stages_their_removal_and_refreshes_live_ones() -> TestResult {
    let dir = tempfile::tempdir()?;
    let clock = ManualClock::new(0);
    let backend = open(dir.path(), &clock);
    let mut s = store(&backend, "op");
    let spec = StateDescriptor::<Value<u64>>::new("ttl")
        .with_ttl(std::time::Duration::from_millis(10))
        .spec()
        .clone();
    s.register(&spec)?;
    s.put_at("ttl", at(0, b"n", b"x"), b"", b"1")?;
    clock.set(8);
    s.put_at("ttl", at(0, b"n", b"y"), b"", b"2")?;
    backend.commit()?;
    // x's deadline is 10, y's 18: at 12 only y is alive, and the scan refreshes it to 22.
    clock.set(12);
    let live = s.scan("ttl", StateShardId(0), NamespaceRange::ALL, None)?;
    assert_eq!(live, vec![entry(b"n", b"y", b"", b"2")]);
    assert_eq!(backend.staged_len(), 2, "x's removal and y's new deadline");
    backend.commit()?;
    let view = backend.read_view()?;
    let left: Vec<_> = view
        .scan(&JobId::new("job"), &OperatorId::new("op"), StateShardId(0))?
        .collect::<Result<_, StateError>>()?;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].expiry_ms, Some(22));
    clock.set(22);
    assert!(
        s.scan("ttl", StateShardId(0), NamespaceRange::ALL, None)?
            .is_empty()
    );
    Ok(())
}

/// A small deterministic generator, so the randomized test needs no dependency.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// 0 to 2 bytes from a 3-letter alphabet: namespaces of mixed lengths that collide often.
    fn short_bytes(&mut self) -> Vec<u8> {
        let len = self.below(3);
        (0..len)
            .map(|_| [0u8, 0x7F, 0xFF][self.below(3) as usize])
            .collect()
    }
}

type ModelKey = (u32, Vec<u8>, Vec<u8>, Vec<u8>);

/// The model's answer: filter by shard and range, order by layout order, apply the limit.
fn model_scan(
    model: &BTreeMap<ModelKey, Vec<u8>>,
    shard: u32,
    range: NamespaceRange<'_>,
    limit: Option<usize>,
) -> Vec<ScannedEntry> {
    let mut out: Vec<_> = model
        .iter()
        .filter(|((s, ns, _, _), _)| *s == shard && range.contains(ns))
        .map(|((_, ns, key, sub), payload)| entry(ns, key, sub, payload))
        .collect();
    out.sort_by(|a, b| {
        let order = |e: &ScannedEntry| {
            (
                e.namespace.len(),
                e.namespace.clone(),
                e.key.len(),
                e.key.clone(),
                e.sub_key.clone(),
            )
        };
        order(a).cmp(&order(b))
    });
    out.truncate(limit.unwrap_or(usize::MAX));
    out
}

#[test]
fn scan_matches_a_model_under_random_puts_removes_commits_writes_and_rollbacks() -> TestResult {
    let dir = tempfile::tempdir()?;
    let backend = open(dir.path(), &ManualClock::new(0));
    let mut s = store(&backend, "op");
    s.register(StateDescriptor::<Map<u8, u8>>::new("m").spec())?;
    let mut rng = SplitMix(7);
    let mut committed: BTreeMap<ModelKey, Vec<u8>> = BTreeMap::new();
    let mut current = committed.clone();
    for step in 0..10_000 {
        let shard = rng.below(2) as u32;
        let (ns, key, sub) = (rng.short_bytes(), rng.short_bytes(), rng.short_bytes());
        let address = at(shard, &ns, &key);
        match rng.below(20) {
            0 => {
                backend.commit()?;
                committed = current.clone();
                if rng.below(2) == 0 {
                    // Writes the committed mutations to redb.
                    backend.sync()?;
                }
            }
            1 => {
                backend.rollback();
                current = committed.clone();
            }
            2..=11 => {
                let payload = step.to_string().into_bytes();
                s.put_at("m", address, &sub, &payload)?;
                current.insert((shard, ns.clone(), key.clone(), sub.clone()), payload);
            }
            19 => {
                // Writes the committed mutations to redb in the middle of a batch.
                backend.read_view()?;
            }
            _ => {
                let existed = s.remove_at("m", address, &sub)?;
                let model_existed = current.remove(&(shard, ns, key, sub)).is_some();
                assert_eq!(existed, model_existed, "step {step}");
            }
        }
        let (from, until) = (rng.short_bytes(), rng.short_bytes());
        let range = NamespaceRange::new(&from, (rng.below(4) != 0).then_some(until.as_slice()));
        let limit = (rng.below(3) == 0).then(|| rng.below(5) as usize);
        assert_eq!(
            s.scan("m", StateShardId(shard), range, limit)?,
            model_scan(&current, shard, range, limit),
            "step {step}, range {range:?}, limit {limit:?}"
        );
    }
    Ok(())
}
