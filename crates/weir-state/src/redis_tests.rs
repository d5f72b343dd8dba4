//! The Redis engine against a real `redis-server` (started by the test kit and stopped by PID):
//! the same state as redb through the same API, across a snapshot and restore both ways; jobs
//! kept apart; TTL per state kind; writes held back while a snapshot reads.
//!
//! They start a server, so they live in the full tier (`full::`).

mod full {
    use crate::{
        KeyedStateExt, ManualClock, RawEntry, RedisConfig, RestoreOptions, SegmentStore,
        SnapshotScope, StateBackend,
    };
    use object_store::memory::InMemory;
    use object_store::path::Path as ObjectPath;
    use std::sync::Arc;
    use std::time::Duration;
    use weir_api::state::{List, Map, Set, Value};
    use weir_api::{
        Epoch, JobId, KeyedStateStore, NamespaceRange, OperatorId, StateAddress, StateDescriptor,
        StateShardId, SubtaskIndex,
    };
    use weir_plan::ShardAssignment;
    use weir_testkit::redis::RedisServer;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    const OP: &str = "op";
    const SHARDS: u32 = 4;

    /// The server; where it cannot be had the test fails with the test kit's message, which
    /// says it was not run and what to install.
    fn server() -> RedisServer {
        RedisServer::start().unwrap_or_else(|e| panic!("{e}"))
    }

    fn count_d() -> StateDescriptor<Value<u64>> {
        StateDescriptor::new("count").with_ttl(Duration::from_secs(10))
    }
    fn prices_d() -> StateDescriptor<Map<String, i64>> {
        StateDescriptor::new("prices").with_ttl(Duration::from_secs(10))
    }
    fn events_d() -> StateDescriptor<List<String>> {
        StateDescriptor::new("events")
    }
    fn seen_d() -> StateDescriptor<Set<u64>> {
        StateDescriptor::new("seen").with_ttl(Duration::from_secs(10))
    }
    fn tags_d() -> StateDescriptor<Set<String>> {
        StateDescriptor::new("tags")
    }

    fn redis(
        server: &RedisServer,
        job: &str,
        clock: &ManualClock,
    ) -> Result<StateBackend, crate::StateError> {
        let clear: Vec<_> = (0..SHARDS)
            .map(|s| (OperatorId::new(OP), StateShardId(s)))
            .collect();
        StateBackend::connect_redis(
            &RedisConfig::new(server.url()).with_prefix("test"),
            &JobId::new(job),
            &clear,
            Arc::new(clock.clone()),
        )
    }

    fn redb(dir: &std::path::Path, clock: &ManualClock) -> StateBackend {
        StateBackend::open_redb(&dir.join("state.redb"), Arc::new(clock.clone())).expect("redb")
    }

    /// A workload over every kind, with namespaces, removals, a shrinking list and a rollback;
    /// committed in several batches.
    fn workload(b: &StateBackend, job: &str) -> TestResult {
        let mut s = b.keyed_store(&JobId::new(job), &OperatorId::new(OP));
        for i in 0..40u64 {
            let key = format!("key-{i}");
            s.set_current_key(key.as_bytes(), StateShardId((i % u64::from(SHARDS)) as u32));
            s.value_state(&count_d())?.update(&i)?;
            s.map_state(&prices_d())?
                .put(&format!("p{}", i % 3), &(i as i64))?;
            s.map_state(&prices_d())?.put(&"z".to_owned(), &-1)?;
            s.list_state(&events_d())?.add_all(&[
                format!("{key}-a"),
                format!("{key}-b"),
                format!("{key}-c"),
            ])?;
            s.set_state(&seen_d())?.insert(&i)?;
            s.set_state(&tags_d())?.insert(&format!("t{}", i % 5))?;
            s.set_current_namespace(&(i % 7).to_be_bytes());
            s.value_state(&count_d())?.update(&(i * 100))?;
            s.set_current_namespace(&[]);
            if i % 10 == 9 {
                b.commit()?;
            }
        }
        b.commit()?;
        // Changes after the first write: removals, a list that shrinks, a set element gone.
        for i in (0..40u64).step_by(3) {
            let key = format!("key-{i}");
            s.set_current_key(key.as_bytes(), StateShardId((i % u64::from(SHARDS)) as u32));
            s.map_state(&prices_d())?.remove(&"z".to_owned())?;
            s.list_state(&events_d())?
                .update(&[format!("{key}-only")])?;
            s.set_state(&tags_d())?.remove(&format!("t{}", i % 5))?;
            if i % 2 == 0 {
                s.value_state(&count_d())?.clear()?;
            }
        }
        b.sync()?;
        // A batch rolled back leaves nothing behind.
        s.set_current_key(b"key-1", StateShardId(1));
        s.value_state(&count_d())?.update(&999_999)?;
        s.list_state(&events_d())?.clear()?;
        b.rollback();
        Ok(())
    }

    /// Every committed entry of the operator, all shards, through a read view.
    fn entries(b: &StateBackend, job: &str) -> Vec<RawEntry> {
        let view = b.read_view().expect("view");
        (0..SHARDS)
            .flat_map(|s| {
                view.scan(&JobId::new(job), &OperatorId::new(OP), StateShardId(s))
                    .expect("scan")
                    .collect::<Result<Vec<_>, _>>()
                    .expect("entries")
            })
            .collect()
    }

    /// What the API reads for every key of the workload.
    fn api_reads(b: &StateBackend, job: &str) -> Result<Vec<String>, Box<dyn std::error::Error>> {
        let mut s = b.keyed_store(&JobId::new(job), &OperatorId::new(OP));
        let mut out = Vec::new();
        for i in 0..40u64 {
            let key = format!("key-{i}");
            s.set_current_key(key.as_bytes(), StateShardId((i % u64::from(SHARDS)) as u32));
            out.push(format!(
                "{key} {:?} {:?} {:?} {:?} {:?}",
                s.value_state(&count_d())?.value()?,
                s.map_state(&prices_d())?.entries()?,
                s.list_state(&events_d())?.get()?,
                s.set_state(&seen_d())?.elements()?,
                s.set_state(&tags_d())?.elements()?,
            ));
        }
        // A namespace range scan, as timers use, with a limit.
        s.register(count_d().spec())?;
        let scanned = s.scan(
            "count",
            StateShardId(2),
            NamespaceRange::new(&[0], None),
            Some(5),
        )?;
        out.push(format!("{scanned:?}"));
        let at = StateAddress {
            shard: StateShardId(3),
            namespace: &5u64.to_be_bytes(),
            key: b"key-19",
        };
        out.push(format!("{:?}", s.get_at("count", at, &[])?));
        Ok(out)
    }

    fn scope(job: &str) -> Result<SnapshotScope, Box<dyn std::error::Error>> {
        Ok(SnapshotScope {
            namespace: "ns".to_owned(),
            epoch: Epoch(1),
            job: JobId::new(job),
            operator: OperatorId::new(OP),
            subtask: SubtaskIndex(0),
            shards: ShardAssignment::contiguous(SHARDS, 1)?,
        })
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redis_holds_what_redb_holds_and_each_restores_the_others_snapshot() -> TestResult {
        let server = server();
        let dir = tempfile::tempdir()?;
        let clock = ManualClock::new(1_000);
        let on_redb = redb(dir.path(), &clock);
        let on_redis = redis(&server, "same", &clock)?;
        workload(&on_redb, "same")?;
        workload(&on_redis, "same")?;
        let expected = entries(&on_redb, "same");
        assert!(expected.len() > 300, "{} entries", expected.len());
        assert_eq!(entries(&on_redis, "same"), expected);
        assert_eq!(api_reads(&on_redis, "same")?, api_reads(&on_redb, "same")?);
        let (job, op) = (JobId::new("same"), OperatorId::new(OP));
        for name in ["count", "prices", "events", "seen", "tags"] {
            assert_eq!(
                on_redis.state_size(&job, &op, name)?,
                on_redb.state_size(&job, &op, name)?,
                "{name}"
            );
        }

        // redb's snapshot restored into a fresh Redis namespace, and Redis's into redb.
        let segments = SegmentStore::new(Arc::new(InMemory::new()), ObjectPath::from("cp"));
        let from_redb = segments
            .begin_snapshot(&on_redb, scope("same")?)?
            .write()
            .await?;
        let from_redis = segments
            .begin_snapshot(&on_redis, scope("same")?)?
            .write()
            .await?;
        let digest = |d: &[crate::SegmentDescriptor]| {
            d.iter()
                .map(|d| (d.shard, d.state.clone(), d.rows, d.sha256.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            digest(&from_redis),
            digest(&from_redb),
            "byte-identical segments"
        );
        let into_redis = redis(&server, "same", &clock)?;
        assert!(
            entries(&into_redis, "same").is_empty(),
            "cleared on connect"
        );
        segments
            .restore(&into_redis, &from_redb, &RestoreOptions::new())
            .await?;
        assert_eq!(entries(&into_redis, "same"), expected);
        assert_eq!(
            api_reads(&into_redis, "same")?,
            api_reads(&on_redb, "same")?
        );
        let dir2 = tempfile::tempdir()?;
        let into_redb = redb(dir2.path(), &clock);
        segments
            .restore(&into_redb, &from_redis, &RestoreOptions::new())
            .await?;
        assert_eq!(entries(&into_redb, "same"), expected);
        Ok(())
    }

    #[test]
    fn two_jobs_with_the_same_state_names_never_see_each_other() -> TestResult {
        let server = server();
        let clock = ManualClock::new(1_000);
        let a = redis(&server, "job-a", &clock)?;
        let b = redis(&server, "job-b", &clock)?;
        for (backend, job, n) in [(&a, "job-a", 1u64), (&b, "job-b", 2)] {
            let mut s = backend.keyed_store(&JobId::new(job), &OperatorId::new(OP));
            s.set_current_key(b"k", StateShardId(0));
            s.value_state(&count_d())?.update(&n)?;
            s.map_state(&prices_d())?
                .put(&job.to_owned(), &(n as i64))?;
            backend.commit()?;
            backend.sync()?;
        }
        let read = |backend: &StateBackend, job: &str| -> Result<_, Box<dyn std::error::Error>> {
            let mut s = backend.keyed_store(&JobId::new(job), &OperatorId::new(OP));
            s.set_current_key(b"k", StateShardId(0));
            Ok((
                s.value_state(&count_d())?.value()?,
                s.map_state(&prices_d())?.entries()?,
            ))
        };
        assert_eq!(read(&a, "job-a")?, (Some(1), vec![("job-a".to_owned(), 1)]));
        assert_eq!(read(&b, "job-b")?, (Some(2), vec![("job-b".to_owned(), 2)]));
        // A task of job b starting again clears only job b's shards.
        let b_again = redis(&server, "job-b", &clock)?;
        assert!(entries(&b_again, "job-b").is_empty());
        assert_eq!(entries(&a, "job-a").len(), 2);
        // The layout is the documented one.
        let keys = server.command(&["KEYS", "test:job-a:*"])?;
        for expected in [
            "test:job-a:format",
            "test:job-a:registry",
            "test:job-a:shards",
            "test:job-a:index:op:count:shard:0",
            "test:job-a:index:op:prices:shard:0",
        ] {
            assert!(keys.contains(expected), "{expected} in {keys}");
        }
        let kind = server.command(&[
            "TYPE",
            "test:job-a:state:op:prices:shard:0:\x00\x00\x00\x00\x00\x00\x00\x01k",
        ])?;
        assert!(kind.contains("hash"), "{kind}");
        Ok(())
    }

    #[test]
    fn ttl_means_on_redis_what_it_means_on_redb_for_every_kind() -> TestResult {
        let server = server();
        let dir = tempfile::tempdir()?;
        let clock = ManualClock::new(1_000);
        let on_redb = redb(dir.path(), &clock);
        let on_redis = redis(&server, "ttl", &clock)?;
        let snapshot = |clock: &ManualClock| -> Result<_, Box<dyn std::error::Error>> {
            let mut seen = Vec::new();
            for b in [&on_redb, &on_redis] {
                let mut s = b.keyed_store(&JobId::new("ttl"), &OperatorId::new(OP));
                s.set_current_key(b"k", StateShardId(1));
                let list = StateDescriptor::<List<u64>>::new("l").with_ttl(Duration::from_secs(10));
                seen.push(format!(
                    "{:?} {:?} {:?} {:?} at {}",
                    s.value_state(&count_d())?.value()?,
                    s.map_state(&prices_d())?.entries()?,
                    s.list_state(&list)?.get()?,
                    s.set_state(&seen_d())?.elements()?,
                    clock_now(clock),
                ));
                b.commit()?;
                b.sync()?;
            }
            Ok(seen)
        };
        for b in [&on_redb, &on_redis] {
            let mut s = b.keyed_store(&JobId::new("ttl"), &OperatorId::new(OP));
            s.set_current_key(b"k", StateShardId(1));
            let list = StateDescriptor::<List<u64>>::new("l").with_ttl(Duration::from_secs(10));
            s.value_state(&count_d())?.update(&7)?;
            s.map_state(&prices_d())?.put(&"a".to_owned(), &1)?;
            s.list_state(&list)?.add_all(&[1, 2])?;
            s.set_state(&seen_d())?.insert(&3)?;
            b.commit()?;
            b.sync()?;
        }
        // Alive at 9 s (each read slides the deadline to 19 s), gone past 19 s.
        clock.set(9_000);
        let alive = snapshot(&clock)?;
        assert_eq!(alive[0], alive[1]);
        assert!(alive[0].starts_with("Some(7)"), "{}", alive[0]);
        clock.set(19_001);
        let gone = snapshot(&clock)?;
        assert_eq!(gone[0], gone[1]);
        assert!(gone[0].starts_with("None [] [] []"), "{}", gone[0]);
        // Redis expires the keys of a state with a TTL by itself, after their deadlines.
        let pttl: i64 = server
            .command(&[
                "PTTL",
                "test:ttl:state:op:prices:shard:1:\x00\x00\x00\x00\x00\x00\x00\x01k",
            ])?
            .trim()
            .trim_start_matches(':')
            .parse()
            .unwrap_or(-3);
        assert!(pttl == -2 || (pttl > 0 && pttl <= 11_000), "PTTL {pttl}");
        Ok(())
    }

    fn clock_now(clock: &ManualClock) -> u64 {
        use crate::StateClock;
        clock.now_ms()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn commits_during_a_snapshot_wait_in_the_journal_and_the_view_sees_the_barrier()
    -> TestResult {
        let server = server();
        let clock = ManualClock::new(1_000);
        let b = redis(&server, "paused", &clock)?;
        let mut s = b.keyed_store(&JobId::new("paused"), &OperatorId::new(OP));
        s.set_current_key(b"k", StateShardId(0));
        s.value_state(&count_d())?.update(&1)?;
        b.commit()?;
        let view = b.read_view()?;
        s.value_state(&count_d())?.update(&2)?;
        b.commit()?;
        b.sync()?;
        // A second view while the first lives sees the second commit through its overlay.
        let second = b.read_view()?;
        let read = |v: &crate::StateReadView| {
            v.scan(&JobId::new("paused"), &OperatorId::new(OP), StateShardId(0))
                .expect("scan")
                .map(|e| e.expect("entry").payload)
                .collect::<Vec<_>>()
        };
        assert_eq!(read(&view), vec![crate::codec::encode("count", &1u64)?]);
        assert_eq!(read(&second), vec![crate::codec::encode("count", &2u64)?]);
        assert_eq!(s.value_state(&count_d())?.value()?, Some(2));
        drop((view, second));
        b.sync()?;
        let fresh = b.read_view()?;
        assert_eq!(read(&fresh), vec![crate::codec::encode("count", &2u64)?]);
        Ok(())
    }

    #[test]
    fn a_server_with_a_password_is_reached_with_the_configured_one_only() -> TestResult {
        let server = server();
        server.command(&["CONFIG", "SET", "requirepass", "s3cret"])?;
        let clock = ManualClock::new(1_000);
        let url = RedisConfig::new(server.url());
        let refused =
            StateBackend::connect_redis(&url, &JobId::new("auth"), &[], Arc::new(clock.clone()))
                .expect_err("no password");
        let message = refused.to_string();
        assert!(
            message.contains("Redis") && !message.contains("s3cret"),
            "{message}"
        );
        let config = url.with_password("s3cret");
        assert!(!format!("{config:?}").contains("s3cret"));
        let b = StateBackend::connect_redis(&config, &JobId::new("auth"), &[], Arc::new(clock))?;
        let mut s = b.keyed_store(&JobId::new("auth"), &OperatorId::new(OP));
        s.set_current_key(b"k", StateShardId(0));
        s.value_state(&count_d())?.update(&5)?;
        b.commit()?;
        b.sync()?;
        assert_eq!(s.value_state(&count_d())?.value()?, Some(5));
        Ok(())
    }

    #[test]
    fn a_schema_version_change_migrates_the_redis_state_as_it_does_redb() -> TestResult {
        let server = server();
        let dir = tempfile::tempdir()?;
        let clock = ManualClock::new(1_000);
        let v1 = StateDescriptor::<Value<u32>>::new("total");
        let v2 = StateDescriptor::<Value<(u32, String)>>::new("total").with_schema_version(2);
        let mut seen = Vec::new();
        for b in [redb(dir.path(), &clock), redis(&server, "migrate", &clock)?] {
            let mut s = b.keyed_store(&JobId::new("migrate"), &OperatorId::new(OP));
            for (i, key) in ["a", "b", "c"].iter().enumerate() {
                s.set_current_key(key.as_bytes(), StateShardId(i as u32));
                s.value_state(&v1)?.update(&(i as u32 + 1))?;
            }
            b.commit()?;
            b.sync()?;
            let err = s
                .value_state(&v2)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(
                err.contains("version 1") && err.contains("version 2"),
                "{err}"
            );
            b.register_typed_migration(&OperatorId::new(OP), "total", 1, |old: &[u8]| {
                let v: u32 = crate::codec::decode("total", old).map_err(|e| e.to_string())?;
                Ok((v * 10, "migrated".to_owned()))
            });
            let mut values = Vec::new();
            for (i, key) in ["a", "b", "c"].iter().enumerate() {
                s.set_current_key(key.as_bytes(), StateShardId(i as u32));
                values.push(s.value_state(&v2)?.value()?);
            }
            seen.push((values, entries(&b, "migrate")));
        }
        assert_eq!(seen[0], seen[1]);
        assert_eq!(seen[0].0[2], Some((30, "migrated".to_owned())));
        Ok(())
    }
}
