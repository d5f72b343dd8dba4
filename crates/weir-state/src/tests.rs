//! Behaviour tests of the backend, the journal, TTL, isolation, accounting and schema versions.

use crate::{
    KeyedStateExt, ManualClock, OperatorStore, RawEntry, STATE_FORMAT_VERSION, StateBackend,
    StateError, StateSize,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use weir_api::state::{List, Map, Set, Value};
use weir_api::{JobId, KeyedStateStore, OperatorId, StateDescriptor, StateShardId};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn open(path: &Path, clock: &ManualClock) -> Result<StateBackend, StateError> {
    StateBackend::open_redb(path, Arc::new(clock.clone()))
}

fn store(backend: &StateBackend, job: &str, op: &str) -> OperatorStore {
    backend.keyed_store(&JobId::new(job), &OperatorId::new(op))
}

/// The state shard of a string key, from the stable key hash over 8 shards.
fn s_shard(key: &str) -> u32 {
    let column: arrow::array::ArrayRef = Arc::new(arrow::array::StringArray::from(vec![key]));
    weir_plan::key_hash::shard_ids(&[column], 8).expect("hash")[0]
}

/// Sets the current key (its UTF-8 bytes) with its shard from the stable key hash.
fn set_key(store: &mut OperatorStore, key: &str) {
    store.set_current_key(key.as_bytes(), StateShardId(s_shard(key)));
}

fn count() -> StateDescriptor<Value<u64>> {
    StateDescriptor::new("count")
}

fn committed(backend: &StateBackend, job: &str, op: &str, shard: u32) -> Vec<RawEntry> {
    let view = backend.read_view().expect("view");
    view.scan(&JobId::new(job), &OperatorId::new(op), StateShardId(shard))
        .expect("scan")
        .collect::<Result<Vec<_>, _>>()
        .expect("entries")
}

#[test]
fn value_and_map_state_survive_reopen() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("t.redb");
    let clock = ManualClock::new(1_000);
    let prices = StateDescriptor::<Map<String, f64>>::new("prices");
    {
        let backend = open(&path, &clock)?;
        let mut s = store(&backend, "job", "op");
        set_key(&mut s, "alice");
        s.value_state(&count())?.update(&41)?;
        let mut m = s.map_state(&prices)?;
        m.put(&"b".to_owned(), &2.5)?;
        m.put(&"a".to_owned(), &1.0)?;
        assert!(m.remove(&"b".to_owned())?);
        assert!(!m.remove(&"zz".to_owned())?);
        backend.commit()?;
    }
    let backend = open(&path, &clock)?;
    let mut s = store(&backend, "job", "op");
    set_key(&mut s, "alice");
    assert_eq!(s.value_state(&count())?.value()?, Some(41));
    let mut m = s.map_state(&prices)?;
    assert_eq!(m.entries()?, vec![("a".to_owned(), 1.0)]);
    assert_eq!(m.get(&"a".to_owned())?, Some(1.0));
    assert!(!m.contains(&"b".to_owned())?);
    set_key(&mut s, "bob");
    assert_eq!(s.value_state(&count())?.value()?, None);
    assert!(s.map_state(&prices)?.is_empty()?);
    Ok(())
}

#[test]
fn commits_are_visible_at_once_and_durable_after_sync() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("t.redb");
    let clock = ManualClock::new(1_000);
    {
        let backend = open(&path, &clock)?;
        assert!(!backend.needs_sync(), "a fresh file has nothing to sync");
        let mut s = store(&backend, "job", "op");
        set_key(&mut s, "alice");
        s.value_state(&count())?.update(&7)?;
        backend.commit()?;
        assert!(backend.needs_sync(), "a commit is not fsynced");
        // Reads and snapshot views see the commit before any sync.
        let shard = s_shard("alice");
        assert_eq!(committed(&backend, "job", "op", shard).len(), 1);
        set_key(&mut s, "alice");
        assert_eq!(s.value_state(&count())?.value()?, Some(7));
        backend.sync()?;
        assert!(!backend.needs_sync());
        backend.sync()?;
        assert!(
            !backend.needs_sync(),
            "a sync with nothing to do stays a no-op"
        );
        set_key(&mut s, "bob");
        s.value_state(&count())?.update(&1)?;
        backend.commit()?;
        assert!(backend.needs_sync());
        backend.sync()?;
    }
    let backend = open(&path, &clock)?;
    let mut s = store(&backend, "job", "op");
    set_key(&mut s, "alice");
    assert_eq!(s.value_state(&count())?.value()?, Some(7));
    set_key(&mut s, "bob");
    assert_eq!(s.value_state(&count())?.value()?, Some(1));
    Ok(())
}

#[test]
fn jobs_operators_and_namespaces_never_see_each_other() -> TestResult {
    let dir = tempfile::tempdir()?;
    let backend = open(&dir.path().join("t.redb"), &ManualClock::new(0))?;
    let mut stores = [
        store(&backend, "job-a", "op"),
        store(&backend, "job-b", "op"),
        store(&backend, "job-a", "op2"),
    ];
    for (i, s) in (1u64..).zip(stores.iter_mut()) {
        set_key(s, "k");
        s.value_state(&count())?.update(&i)?;
    }
    // Also a second namespace of the first store.
    stores[0].set_current_namespace(b"window-1");
    stores[0].value_state(&count())?.update(&99)?;
    stores[0].set_current_namespace(b"");
    for committed_yet in [false, true] {
        for (i, s) in (1u64..).zip(stores.iter_mut()) {
            assert_eq!(
                s.value_state(&count())?.value()?,
                Some(i),
                "committed: {committed_yet}"
            );
        }
        backend.commit()?;
    }
    let shard = s_shard("k");
    assert_eq!(committed(&backend, "job-a", "op", shard).len(), 2);
    assert_eq!(committed(&backend, "job-b", "op", shard).len(), 1);
    Ok(())
}

#[test]
fn journal_reads_its_writes_rolls_back_and_commits_atomically() -> TestResult {
    let dir = tempfile::tempdir()?;
    let backend = open(&dir.path().join("t.redb"), &ManualClock::new(0))?;
    let mut s = store(&backend, "j", "op");
    set_key(&mut s, "k");
    s.value_state(&count())?.update(&1)?;
    backend.commit()?;
    let before = committed(&backend, "j", "op", s_shard("k"));

    s.value_state(&count())?.update(&2)?;
    set_key(&mut s, "other");
    s.value_state(&count())?.update(&7)?;
    set_key(&mut s, "k");
    assert_eq!(
        s.value_state(&count())?.value()?,
        Some(2),
        "read-your-writes"
    );
    backend.rollback();
    assert_eq!(committed(&backend, "j", "op", s_shard("k")), before);
    assert_eq!(s.value_state(&count())?.value()?, Some(1));

    s.value_state(&count())?.update(&3)?;
    set_key(&mut s, "other");
    s.value_state(&count())?.update(&8)?;
    let view = backend.read_view()?;
    backend.commit()?;
    // The view taken before the commit is a point-in-time snapshot.
    let old: Vec<_> = view
        .scan(
            &JobId::new("j"),
            &OperatorId::new("op"),
            StateShardId(s_shard("other")),
        )?
        .collect::<Result<_, _>>()?;
    assert!(
        old.iter()
            .all(|e| e.parts().map(|p| p.key != b"other").unwrap_or(false))
    );
    set_key(&mut s, "k");
    assert_eq!(s.value_state(&count())?.value()?, Some(3));
    set_key(&mut s, "other");
    assert_eq!(s.value_state(&count())?.value()?, Some(8));
    assert_eq!(backend.staged_len(), 0);
    Ok(())
}

/// Runs `(key, increment)` batches through the journal; the sink fails once at `fail_at` (after
/// the operator processed that batch), then the task replays from its last committed batch.
fn run_increments(
    path: &Path,
    batches: &[Vec<(String, u64)>],
    fail_at: Option<usize>,
) -> BTreeMap<String, u64> {
    let backend = open(path, &ManualClock::new(0)).expect("open");
    let mut s = store(&backend, "job", "sum");
    let desc = StateDescriptor::<Value<u64>>::new("sum");
    let mut failed = false;
    let mut next = 0; // the last acknowledged position: the next batch to read
    while next < batches.len() {
        for (key, inc) in &batches[next] {
            set_key(&mut s, key);
            let mut sum = s.value_state(&desc).expect("state");
            let v = sum.value().expect("read").unwrap_or(0);
            sum.update(&(v + inc)).expect("write");
        }
        if fail_at == Some(next) && !failed {
            failed = true;
            backend.rollback(); // output failed: replay from the last acknowledged position
            continue;
        }
        backend.commit().expect("commit"); // output acknowledged
        next += 1;
    }
    let mut out = BTreeMap::new();
    for batch in batches {
        for (key, _) in batch {
            set_key(&mut s, key);
            let v = s.value_state(&desc).expect("state").value().expect("read");
            out.insert(key.clone(), v.unwrap_or(0));
        }
    }
    out
}

#[test]
fn replay_after_a_failed_sink_matches_a_run_that_never_failed() -> TestResult {
    let dir = tempfile::tempdir()?;
    let keys = ["a", "bb", "ccc", "dddd"];
    let batches: Vec<Vec<(String, u64)>> = (0u64..10)
        .map(|b| {
            (0u64..7)
                .map(|i| (keys[((b * 7 + i) % 4) as usize].to_owned(), b * 10 + i))
                .collect()
        })
        .collect();
    let clean = run_increments(&dir.path().join("clean.redb"), &batches, None);
    let failed = run_increments(&dir.path().join("failed.redb"), &batches, Some(5));
    let mut expected = BTreeMap::new();
    for (k, inc) in batches.iter().flatten() {
        *expected.entry(k.clone()).or_insert(0) += inc;
    }
    assert_eq!(clean, expected);
    assert_eq!(failed, expected);
    Ok(())
}

#[test]
fn ttl_slides_on_access_and_expired_entries_are_never_returned() -> TestResult {
    let dir = tempfile::tempdir()?;
    let clock = ManualClock::new(1_000);
    let backend = open(&dir.path().join("t.redb"), &clock)?;
    let mut s = store(&backend, "j", "op");
    let d = StateDescriptor::<Value<u64>>::new("v").with_ttl(Duration::from_secs(10));
    set_key(&mut s, "k");
    s.value_state(&d)?.update(&5)?; // deadline 11_000
    backend.commit()?;
    clock.set(8_000);
    assert_eq!(s.value_state(&d)?.value()?, Some(5)); // refreshed to 18_000
    backend.commit()?;
    let entry = committed(&backend, "j", "op", s_shard("k")).remove(0);
    assert_eq!(entry.expiry_ms, Some(18_000));
    clock.set(17_999);
    assert_eq!(s.value_state(&d)?.value()?, Some(5)); // refreshed to 27_999
    backend.rollback(); // the refresh was not committed: deadline stays 18_000
    clock.set(18_000);
    assert_eq!(s.value_state(&d)?.value()?, None, "expired at its deadline");
    backend.commit()?; // the lazy removal
    assert!(committed(&backend, "j", "op", s_shard("k")).is_empty());
    assert_eq!(
        backend.state_size(&JobId::new("j"), &OperatorId::new("op"), "v")?,
        StateSize::default()
    );

    // Map entries expire one by one; purge removes committed dead entries with exact sizes.
    let m = StateDescriptor::<Map<u32, u32>>::new("m").with_ttl(Duration::from_millis(100));
    for i in 0..4 {
        s.map_state(&m)?.put(&i, &i)?;
        clock.advance(30);
    }
    backend.commit()?; // deadlines 18_100, 18_130, 18_160, 18_190
    clock.set(18_150);
    assert_eq!(backend.purge_expired(clock.now())?, 2);
    let size = backend.state_size(&JobId::new("j"), &OperatorId::new("op"), "m")?;
    assert_eq!(size, scanned_size(&backend, "m"));
    assert_eq!(size.entries, 2);
    assert_eq!(s.map_state(&m)?.entries()?, vec![(2, 2), (3, 3)]);
    Ok(())
}

trait Now {
    fn now(&self) -> u64;
}
impl Now for ManualClock {
    fn now(&self) -> u64 {
        crate::StateClock::now_ms(self)
    }
}

/// The size of a state recomputed from a full scan of every shard.
fn scanned_size(backend: &StateBackend, state: &str) -> StateSize {
    let view = backend.read_view().expect("view");
    let mut size = StateSize::default();
    for shard in 0..8 {
        let scan = view
            .scan_state(
                &JobId::new("j"),
                &OperatorId::new("op"),
                StateShardId(shard),
                state,
            )
            .expect("scan");
        for e in scan {
            let e = e.expect("entry");
            size.entries += 1;
            size.bytes += (e.key.len() + 8 + e.payload.len()) as u64;
        }
    }
    size
}

#[test]
fn size_accounting_is_exact_under_put_overwrite_and_delete() -> TestResult {
    let dir = tempfile::tempdir()?;
    let backend = open(&dir.path().join("t.redb"), &ManualClock::new(0))?;
    let mut s = store(&backend, "j", "op");
    let m = StateDescriptor::<Map<String, String>>::new("m");
    let job = JobId::new("j");
    let op = OperatorId::new("op");
    for round in 0..4usize {
        for k in ["a", "bb", "ccc"] {
            set_key(&mut s, k);
            let mut map = s.map_state(&m)?;
            map.put(&format!("x{round}"), &"v".repeat(round * 3))?;
            map.put(&"same".to_owned(), &"w".repeat(round))?; // overwrite
            if round % 2 == 1 {
                map.remove(&format!("x{}", round - 1))?;
            }
        }
        backend.commit()?;
        assert_eq!(
            backend.state_size(&job, &op, "m")?,
            scanned_size(&backend, "m"),
            "round {round}"
        );
    }
    set_key(&mut s, "a");
    s.map_state(&m)?.clear()?;
    backend.commit()?;
    assert_eq!(
        backend.state_size(&job, &op, "m")?,
        scanned_size(&backend, "m")
    );
    assert_eq!(backend.state_size(&job, &op, "m")?.entries, 6);
    Ok(())
}

#[test]
fn list_and_set_states() -> TestResult {
    let dir = tempfile::tempdir()?;
    let backend = open(&dir.path().join("t.redb"), &ManualClock::new(0))?;
    let mut s = store(&backend, "j", "op");
    let l = StateDescriptor::<List<String>>::new("l");
    let st = StateDescriptor::<Set<i64>>::new("s");
    set_key(&mut s, "k");
    s.list_state(&l)?.add(&"x".to_owned())?;
    backend.commit()?;
    s.list_state(&l)?
        .add_all(&["y".to_owned(), "z".to_owned()])?;
    assert_eq!(s.list_state(&l)?.get()?, ["x", "y", "z"]);
    s.list_state(&l)?.update(&["q".to_owned()])?;
    s.list_state(&l)?.add(&"r".to_owned())?;
    backend.commit()?;
    assert_eq!(s.list_state(&l)?.get()?, ["q", "r"]);

    let mut set = s.set_state(&st)?;
    assert!(set.insert(&3)?);
    assert!(set.insert(&-1)?);
    assert!(!set.insert(&3)?);
    assert!(set.contains(&-1)?);
    assert!(set.remove(&-1)?);
    assert_eq!(set.elements()?, vec![3]);
    backend.commit()?;
    set_key(&mut s, "other");
    assert!(s.set_state(&st)?.elements()?.is_empty());
    assert!(s.list_state(&l)?.get()?.is_empty());
    Ok(())
}

#[test]
fn scans_touch_only_their_operator_shard_and_state() -> TestResult {
    let dir = tempfile::tempdir()?;
    let backend = open(&dir.path().join("t.redb"), &ManualClock::new(0))?;
    let a = StateDescriptor::<Value<u8>>::new("a");
    let b = StateDescriptor::<Value<u8>>::new("b");
    for op in ["op", "op2"] {
        let mut s = store(&backend, "j", op);
        for shard in [1u32, 2, 256] {
            s.set_current_key(b"k", StateShardId(shard));
            s.value_state(&a)?.update(&1)?;
            s.value_state(&b)?.update(&2)?;
        }
    }
    backend.commit()?;
    let view = backend.read_view()?;
    let (job, op) = (JobId::new("j"), OperatorId::new("op"));
    let segment: Vec<_> = view
        .scan_state(&job, &op, StateShardId(2), "a")?
        .collect::<Result<_, _>>()?;
    assert_eq!(segment.len(), 1);
    let parts = segment[0].parts()?;
    assert_eq!(
        (parts.operator, parts.shard, parts.state, parts.key),
        ("op", StateShardId(2), "a", &b"k"[..])
    );
    assert_eq!(segment[0].payload, vec![1]);
    assert_eq!(segment[0].expiry_ms, None);
    assert_eq!(view.scan(&job, &op, StateShardId(256))?.count(), 2);
    let mut names: Vec<_> = view
        .registered_states(&job, &op)?
        .into_iter()
        .map(|s| s.name)
        .collect();
    names.sort();
    assert_eq!(names, ["a", "b"]);
    Ok(())
}

#[test]
fn a_file_of_another_format_version_is_refused() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("t.redb");
    drop(open(&path, &ManualClock::new(0))?);
    {
        let db = redb::Database::create(&path)?;
        let txn = db.begin_write()?;
        txn.open_table(redb::TableDefinition::<&str, u32>::new("weir_meta"))?
            .insert("format_version", STATE_FORMAT_VERSION + 1)?;
        txn.commit()?;
    }
    match open(&path, &ManualClock::new(0)) {
        Err(StateError::FormatVersion {
            found, expected, ..
        }) => {
            assert_eq!(
                (found, expected),
                (STATE_FORMAT_VERSION + 1, STATE_FORMAT_VERSION)
            );
        }
        other => panic!("expected a format version error, got {other:?}"),
    }
    Ok(())
}

#[test]
fn schema_versions_are_checked_and_migrated() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("t.redb");
    let v1 = StateDescriptor::<Value<u32>>::new("total");
    let v2 = StateDescriptor::<Value<(u32, String)>>::new("total").with_schema_version(2);
    {
        let backend = open(&path, &ManualClock::new(0))?;
        let mut s = store(&backend, "j", "op");
        set_key(&mut s, "k");
        s.value_state(&v1)?.update(&7)?;
        backend.commit()?;
    }
    let backend = open(&path, &ManualClock::new(0))?;
    let mut s = store(&backend, "j", "op");
    let err = s
        .value_state(&v2)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    for needle in ["`total`", "`op`", "version 1", "version 2"] {
        assert!(err.contains(needle), "{err} should name {needle}");
    }
    let wrong_kind = StateDescriptor::<Map<u32, u32>>::new("total");
    assert!(s.map_state(&wrong_kind).is_err());

    backend.register_typed_migration(&OperatorId::new("op"), "total", 1, |old: &[u8]| {
        let v: u32 = crate::codec::decode("total", old).map_err(|e| e.to_string())?;
        Ok((v * 10, "migrated".to_owned()))
    });
    set_key(&mut s, "k");
    assert_eq!(
        s.value_state(&v2)?.value()?,
        Some((70, "migrated".to_owned()))
    );
    let size = backend.state_size(&JobId::new("j"), &OperatorId::new("op"), "total")?;
    assert_eq!(size, scanned_size(&backend, "total"));
    let mut fresh = store(&backend, "j", "op");
    assert!(
        fresh.value_state(&v1).is_err(),
        "the stored version is now 2"
    );
    Ok(())
}

#[test]
fn access_without_a_current_key_is_an_error() -> TestResult {
    let dir = tempfile::tempdir()?;
    let backend = open(&dir.path().join("t.redb"), &ManualClock::new(0))?;
    let mut s = store(&backend, "j", "op");
    let err = s
        .value_state(&count())?
        .value()
        .err()
        .map(|e| e.to_string());
    assert!(err.unwrap_or_default().contains("without a current key"));
    Ok(())
}

#[test]
fn task_files_are_one_per_subtask_and_ids_cannot_escape() {
    let task = weir_api::TaskId {
        job: JobId::new("../etc"),
        pipeline: weir_api::PipelineId::new("p"),
        vertex: weir_api::VertexId::new("a/b"),
        subtask: weir_api::SubtaskIndex(3),
    };
    let path = crate::task_state_file(Path::new("/state"), &task);
    assert_eq!(path, Path::new("/state/%2E.%2Fetc/p/a%2Fb/3.redb"));
}

#[test]
fn handles_can_move_to_other_threads() {
    fn assert_send<T: Send>() {}
    assert_send::<StateBackend>();
    assert_send::<OperatorStore>();
    assert_send::<crate::StateReadView>();
    assert_send::<crate::EntryScan>();
}

/// The filter of keys redb holds never hides one: 70,000 keys (more than its first size
/// holds, so it is rebuilt) written to redb, then read, updated, removed and read again, also
/// after the file is opened anew; and keys only the journal held are found too.
#[test]
fn every_key_written_to_redb_is_found_through_the_filter_and_its_rebuilds() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("t.redb");
    let clock = ManualClock::new(1_000);
    let keys: Vec<String> = (0..70_000).map(|i| format!("user-{i:06}")).collect();
    {
        let backend = open(&path, &clock)?;
        let mut s = store(&backend, "job", "op");
        s.register(count().spec())?;
        for (i, key) in keys.iter().enumerate() {
            set_key(&mut s, key);
            s.value_state(&count())?.update(&(i as u64))?;
        }
        backend.commit()?;
        backend.sync()?;
        // Every key is in redb now; the journal is empty.
        for (i, key) in keys.iter().enumerate().step_by(7) {
            set_key(&mut s, key);
            assert_eq!(s.value_state(&count())?.value()?, Some(i as u64), "{key}");
        }
        // Removals of keys redb holds must reach redb; keys only the journal holds are found.
        for key in keys.iter().step_by(2) {
            set_key(&mut s, key);
            s.value_state(&count())?.clear()?;
        }
        set_key(&mut s, "journal-only");
        s.value_state(&count())?.update(&7)?;
        backend.commit()?;
        backend.sync()?;
        assert_eq!(s.value_state(&count())?.value()?, Some(7));
    }
    let backend = open(&path, &clock)?;
    let mut s = store(&backend, "job", "op");
    s.register(count().spec())?;
    for (i, key) in keys.iter().enumerate() {
        set_key(&mut s, key);
        let expected = (i % 2 == 1).then_some(i as u64);
        assert_eq!(s.value_state(&count())?.value()?, expected, "{key}");
    }
    set_key(&mut s, "journal-only");
    assert_eq!(s.value_state(&count())?.value()?, Some(7));
    Ok(())
}
