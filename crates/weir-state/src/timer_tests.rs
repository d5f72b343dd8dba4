//! Tests of the timer service: ordering, staging, and timers through snapshot, restore and
//! rescale.

use super::*;
use crate::{KeyedStateExt, OperatorStore, assign_segments};
use crate::{ManualClock, RestoreOptions, SegmentStore, SnapshotScope, StateBackend};
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use std::sync::Arc;
use weir_api::state::Value;
use weir_api::{Epoch, JobId, OperatorId, StateDescriptor, SubtaskIndex};
use weir_plan::ShardAssignment;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const SHARDS: u32 = 8;

fn open(dir: &std::path::Path, name: &str, clock: &ManualClock) -> StateBackend {
    StateBackend::open_redb(&dir.join(name), Arc::new(clock.clone())).expect("open")
}

fn store(backend: &StateBackend) -> OperatorStore {
    backend.keyed_store(&JobId::new("job"), &OperatorId::new("window"))
}

fn all_shards() -> Vec<StateShardId> {
    (0..SHARDS).map(StateShardId).collect()
}

fn timer(timestamp_ms: i64, shard: u32, key: &[u8], namespace: &[u8]) -> Timer {
    Timer {
        domain: TimerDomain::EventTime,
        timestamp_ms,
        shard: StateShardId(shard),
        key: key.to_vec(),
        namespace: namespace.to_vec(),
    }
}

fn register(store: &mut OperatorStore, timers: &TimerService, t: &Timer) -> Result<()> {
    timers.register(store, t.timestamp_ms, t.shard, &t.key, &t.namespace)
}

#[test]
fn timestamps_encode_in_numeric_order_and_round_trip() -> TestResult {
    let times = [i64::MIN, -1_000, -1, 0, 1, 255, 256, 1_000, i64::MAX];
    let encoded: Vec<[u8; 8]> = times.iter().map(|t| encode_timestamp(*t)).collect();
    assert!(encoded.windows(2).all(|w| w[0] < w[1]));
    for (t, bytes) in times.iter().zip(&encoded) {
        assert_eq!(decode_timestamp(bytes)?, *t);
    }
    // Golden bytes: the layout is part of the checkpoint format.
    assert_eq!(encode_timestamp(0), [0x80, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(
        encode_timestamp(-1),
        [0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]
    );
    assert_eq!(encode_timestamp(258), [0x80, 0, 0, 0, 0, 0, 1, 2]);
    assert!(matches!(
        decode_timestamp(&[0; 7]),
        Err(StateError::Corrupt { .. })
    ));
    Ok(())
}

#[test]
fn pop_due_fires_in_timestamp_shard_key_namespace_order_and_stages_removal() -> TestResult {
    let dir = tempfile::tempdir()?;
    let backend = open(dir.path(), "t.redb", &ManualClock::new(0));
    let mut s = store(&backend);
    let timers = TimerService::event_time();
    let registered = [
        timer(20, 1, b"b", b"w2"),
        timer(-5, 3, b"a", b""),
        timer(20, 1, b"b", b"w1"),
        timer(20, 0, b"zz", b"w"),
        timer(20, 1, b"a", b"w9"),
        timer(7, 2, b"k", b"w"),
        timer(21, 1, b"a", b"w"),
        timer(i64::MAX, 4, b"end", b""),
    ];
    for t in &registered {
        register(&mut s, &timers, t)?;
    }
    // Idempotent: registering again changes nothing.
    register(&mut s, &timers, &registered[0])?;
    backend.commit()?;
    // Staged on top of the committed ones: a new timer and a deletion.
    register(&mut s, &timers, &timer(3, 5, b"n", b""))?;
    assert!(timers.delete(&mut s, 7, StateShardId(2), b"k", b"w")?);
    assert!(!timers.delete(&mut s, 7, StateShardId(2), b"k", b"w")?);
    assert!(timers.contains(&mut s, 21, StateShardId(1), b"a", b"w")?);

    assert_eq!(timers.next_timestamp(&mut s, &all_shards())?, Some(-5));
    assert_eq!(
        timers.next_timestamp(&mut s, &[StateShardId(1), StateShardId(4)])?,
        Some(20)
    );
    s.set_current_key(b"mine", StateShardId(6));
    s.value_state(&StateDescriptor::<Value<u32>>::new("v"))?
        .update(&1)?;

    let due = timers.pop_due(&mut s, &all_shards(), 20)?;
    assert_eq!(
        due,
        vec![
            timer(-5, 3, b"a", b""),
            timer(3, 5, b"n", b""),
            timer(20, 0, b"zz", b"w"),
            timer(20, 1, b"a", b"w9"),
            timer(20, 1, b"b", b"w1"),
            timer(20, 1, b"b", b"w2"),
        ]
    );
    assert!(timers.pop_due(&mut s, &all_shards(), 20)?.is_empty());
    assert_eq!(timers.next_timestamp(&mut s, &all_shards())?, Some(21));
    // Timer calls never move the current key.
    assert_eq!(
        s.value_state(&StateDescriptor::<Value<u32>>::new("v"))?
            .value()?,
        Some(1)
    );

    // A rollback brings back the popped timers (the replayed batch pops them again) and the
    // deleted one, and drops the staged registration.
    backend.rollback();
    let replayed = timers.pop_due(&mut s, &all_shards(), 20)?;
    let mut expected: Vec<Timer> = registered
        .iter()
        .filter(|t| t.timestamp_ms <= 20)
        .cloned()
        .collect();
    expected.sort();
    assert_eq!(replayed, expected);
    let rest = timers.pop_due(&mut s, &all_shards(), i64::MAX)?;
    assert_eq!(
        rest,
        vec![timer(21, 1, b"a", b"w"), timer(i64::MAX, 4, b"end", b"")]
    );
    assert_eq!(timers.next_timestamp(&mut s, &all_shards())?, None);
    Ok(())
}

#[test]
fn limited_pops_fire_the_same_timers_in_chunks_and_domains_are_separate() -> TestResult {
    let dir = tempfile::tempdir()?;
    let backend = open(dir.path(), "t.redb", &ManualClock::new(0));
    let mut s = store(&backend);
    let event = TimerService::event_time();
    let processing = TimerService::processing_time();
    for i in 0..60i64 {
        let shard = StateShardId((i % 7) as u32);
        let key = format!("k{}", i % 5);
        event.register(&mut s, (i * 37) % 50 - 10, shard, key.as_bytes(), b"")?;
        processing.register(&mut s, i, shard, key.as_bytes(), b"p")?;
    }
    backend.commit()?;
    let shards = all_shards();
    let everything = event.pop_due(&mut s, &shards, 30)?;
    backend.rollback();
    let mut chunked = Vec::new();
    loop {
        let chunk = event.pop_due_limited(&mut s, &shards, 30, 7)?;
        if chunk.is_empty() {
            break;
        }
        assert!(chunk.len() <= 7);
        chunked.extend(chunk);
    }
    assert_eq!(chunked, everything);
    assert!(everything.windows(2).all(|w| w[0] < w[1]));
    assert!(everything.iter().all(|t| t.timestamp_ms <= 30));
    // Duplicated and unsorted shard lists change nothing.
    backend.rollback();
    let reversed: Vec<_> = shards.iter().rev().chain(&shards).copied().collect();
    assert_eq!(event.pop_due(&mut s, &reversed, 30)?, everything);

    let fired = processing.pop_due(&mut s, &shards, 9)?;
    assert_eq!(fired.len(), 10);
    assert!(
        fired
            .iter()
            .all(|t| t.domain == TimerDomain::ProcessingTime && t.namespace == b"p")
    );
    Ok(())
}

/// Registers timers for 40 keys, each in its key's shard.
fn register_many(backend: &StateBackend) -> Result<()> {
    let mut s = store(backend);
    let timers = TimerService::event_time();
    for i in 0..40i64 {
        let key = format!("key-{i}");
        let shard = StateShardId((i as u32 * 5) % SHARDS);
        for window in 0..3i64 {
            let end = (i * 13 + window * 100) % 250 - 50;
            timers.register(&mut s, end, shard, key.as_bytes(), &end.to_be_bytes())?;
        }
    }
    Ok(())
}

#[tokio::test]
async fn timers_survive_snapshot_restore_and_rescale_in_the_same_order() -> TestResult {
    let dir = tempfile::tempdir()?;
    let clock = ManualClock::new(1_000);
    let original = open(dir.path(), "a.redb", &clock);
    register_many(&original)?;
    original.commit()?;

    let segments = SegmentStore::new(Arc::new(InMemory::new()), ObjectPath::from("ckpt"));
    let scope = SnapshotScope {
        namespace: "ns".to_owned(),
        epoch: Epoch(4),
        job: JobId::new("job"),
        operator: OperatorId::new("window"),
        subtask: SubtaskIndex(0),
        shards: ShardAssignment::contiguous(SHARDS, 1)?,
    };
    let written = segments.begin_snapshot(&original, scope)?.write().await?;
    // One timer segment per shard that holds timers, named after the domain's state.
    assert!(written.iter().all(|d| d.state == EVENT_TIME_TIMERS));
    assert!(
        written
            .iter()
            .all(|d| d.path.ends_with("/__timers.event_time.parquet"))
    );

    let restored = open(dir.path(), "b.redb", &clock);
    segments
        .restore(&restored, &written, &RestoreOptions::new())
        .await?;
    let timers = TimerService::event_time();
    let expected = timers.pop_due(&mut store(&original), &all_shards(), 100)?;
    assert!(
        !expected.is_empty() && expected.len() < 120,
        "some timers are not due yet"
    );
    let got = timers.pop_due(&mut store(&restored), &all_shards(), 100)?;
    assert_eq!(got, expected);

    // Rescale to two subtasks: whole shards move, and the union fires in the same order.
    let target = ShardAssignment::contiguous(SHARDS, 2)?;
    let owners = target.owner_table();
    let mut union = Vec::new();
    for (j, mine) in assign_segments(&written, &target)?.iter().enumerate() {
        let b = open(dir.path(), &format!("q{j}.redb"), &clock);
        segments.restore(&b, mine, &RestoreOptions::new()).await?;
        let owned: Vec<_> = all_shards()
            .into_iter()
            .filter(|s| owners[s.0 as usize] == j as u32)
            .collect();
        union.extend(timers.pop_due(&mut store(&b), &owned, 100)?);
        assert!(
            timers
                .pop_due(&mut store(&b), &all_shards(), 100)?
                .is_empty()
        );
    }
    union.sort();
    assert_eq!(union, expected);
    Ok(())
}
