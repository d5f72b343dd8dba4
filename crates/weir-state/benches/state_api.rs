//! Batched keyed-state updates through the state API (journal included) against raw redb, and
//! the same API on a Redis server.
//!
//! Stresses the write path of `weir-state` as an operator drives it: per record
//! `set_current_key` with the key's shard, a typed handle, then either a `Value<u64>` get+put
//! (read the current count, write count + 1) or a `Map<String, f64>` put; after `N` records one
//! `StateBackend::commit`. A commit only acknowledges the batch: the journal reaches the engine
//! when it outgrows its budget (32 MiB), at a sync or for a snapshot, and this workload's journal
//! (at most 100,000 entries of ~130 bytes as the journal counts them) never outgrows it, so `api`
//! measures the journal alone (its preload stays there too: its gets never reach redb). Two more
//! API variants call `StateBackend::sync` after every commit, so every batch reaches the engine:
//! `api_sync` (redb: the batch in one write transaction without durability, then an empty
//! durable one, i.e. an fsync) and `api_redis` (Redis: the journal's outcomes written as
//! pipelines of one script call per user key, at most 1,024 per pipeline; a get of a key not in
//! the journal, i.e. every get of a batch after a sync, is one round trip).
//!
//! The raw baseline writes the same entry keys (built with `weir_state::EntryKey::encode` and
//! `weir_state::codec`, so the bytes are identical) and the same stored values (8-byte expiry
//! header + postcard payload) straight into a redb table, one write transaction per batch of
//! `N` and one `get`/`insert` per key, in the order the records arrive. It commits with redb's
//! default durability (fsync per commit). Two more raw variants bound the comparison:
//! `raw_redb_sorted` sorts each batch by entry key first (the order the journal commits in; the
//! sort is timed), and `raw_redb_no_fsync` commits with `Durability::None` to show what the fsync
//! costs.
//!
//! Input: 100,000 user keys (`user-00000000`...) over 128 state shards (the stable key hash), all
//! present before measuring (steady state: every write overwrites an entry; the Redis variant
//! syncs its preload, so Redis holds every entry). Batch `b` updates the `N` distinct keys
//! `(b * N + j) mod 100,000`, for `N` = 1,000 and 10,000. Throughput is in records (elements).
//! After each benchmark the state is checked: exactly 100,000 entries, and for value states the
//! sum of all counts equals the number of records run, read back through a snapshot view scan
//! (API) or a table iteration (raw); for map states the last batch's entries hold that batch's
//! value. A bench that skipped work cannot pass.
//!
//! The Redis variant runs against a `redis-server` this bench starts
//! (`weir_testkit::redis::RedisServer`: Debian's package, fetched once; no persistence), flushed
//! before each load. Where no server can be had the bench prints `NOT RUN: ...` and measures
//! redb only.
//!
//! Before the criterion groups, an interleaved pass (one batch of each variant in turn, repeated)
//! prints the median time per batch, the API/raw ratio against the 70% target (and against the
//! two bounding variants), the Redis/redb ratio (`api_redis` against `api_sync`, both a sync per
//! batch, and against `api`), the Redis commands and read events per batch (`INFO commandstats`,
//! `INFO stats`) and a `PING` round trip, and the split of each batch between staging (the record loop; for raw redb
//! the gets and inserts) and commit (for the synced variants commit + sync). Set
//! `WEIR_BENCH_RATIO=0` to skip it; a filter that matches no benchmark (`-- ratio_pass_only`)
//! runs only this pass.
//!
//! Run: `CARGO_TARGET_DIR=/var/tmp/weir-target cargo bench -p weir-state --bench state_api`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{
    BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use redb::{
    Database, Durability, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition,
};
use tempfile::TempDir;
use weir_api::state::{Map, Value};
use weir_api::{JobId, KeyedStateStore, OperatorId, StateDescriptor, StateShardId};
use weir_state::{
    EntryKey, KeyedStateExt, ManualClock, OperatorStore, RedisConfig, StateBackend, codec,
};
use weir_testkit::redis::RedisServer;

/// Distinct user keys in the state; every one holds an entry before measuring.
const KEY_SPACE: usize = 100_000;
/// Records (distinct keys) per batch, i.e. per commit / write transaction.
const BATCH_SIZES: [usize; 2] = [1_000, 10_000];
const JOB: &str = "bench";
const OPERATOR: &str = "counter";
const VALUE_STATE: &str = "count";
const MAP_STATE: &str = "last";
/// Map keys of the map state; user key `u` writes field `u % 4`.
const FIELDS: [&str; 4] = ["bid", "ask", "last", "volume"];
/// The table the raw baseline writes: the same definition the backend uses for entries.
const RAW_ENTRIES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("weir_entries");
/// Records per size in the interleaved ratio pass (per variant).
const RATIO_RECORDS: usize = 200_000;

/// Every variant, the API first.
const VARIANTS: [Variant; 6] = [
    Variant::Api,
    Variant::Raw,
    Variant::RawSorted,
    Variant::RawNoFsync,
    Variant::ApiSync,
    Variant::ApiRedis,
];
/// `PING`s timed for the Redis round trip the ratio pass prints.
const PINGS: usize = 2_000;

/// What each record does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `Value<u64>`: read the count, write count + 1.
    ValueGetPut,
    /// `Map<String, f64>`: put one map entry.
    MapPut,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::ValueGetPut => "value_get_put",
            Kind::MapPut => "map_put",
        }
    }
}

/// How a batch reaches the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// Through `KeyedStateExt` handles, the journal and `StateBackend::commit` on redb.
    Api,
    /// As `Api`, plus `StateBackend::sync` after every commit: every batch reaches redb in one
    /// write transaction and is fsynced.
    ApiSync,
    /// As `ApiSync`, on Redis: every batch reaches Redis in pipelines, and the next batch's gets
    /// are round trips.
    ApiRedis,
    /// Raw redb `get`/`insert` of the same bytes in arrival order, default durability (fsync
    /// per commit).
    Raw,
    /// As `Raw`, but the batch is first sorted by entry key (the order the journal commits in),
    /// sorting included in the time: does key order alone explain a difference?
    RawSorted,
    /// Raw redb with `Durability::None`: the same work without the fsync.
    RawNoFsync,
}

impl Variant {
    fn label(self) -> &'static str {
        match self {
            Variant::Api => "api",
            Variant::ApiSync => "api_sync",
            Variant::ApiRedis => "api_redis",
            Variant::Raw => "raw_redb",
            Variant::RawSorted => "raw_redb_sorted",
            Variant::RawNoFsync => "raw_redb_no_fsync",
        }
    }
}

/// The user keys and their shards, as an operator receives them from the key hash.
struct Workload {
    keys: Vec<Vec<u8>>,
    shards: Vec<u32>,
    fields: Vec<String>,
}

impl Workload {
    fn new() -> Self {
        let names: Vec<String> = (0..KEY_SPACE).map(|u| format!("user-{u:08}")).collect();
        let column: arrow::array::ArrayRef =
            Arc::new(arrow::array::StringArray::from_iter_values(&names));
        let shards = weir_plan::key_hash::shard_ids(&[column], weir_plan::DEFAULT_STATE_SHARDS)
            .expect("the key hash accepts strings");
        Self {
            keys: names.into_iter().map(String::into_bytes).collect(),
            shards,
            fields: FIELDS.iter().map(|f| (*f).to_owned()).collect(),
        }
    }

    /// The user key of record `j` of batch `b` with `n` records per batch.
    fn key_index(b: u64, n: usize, j: usize) -> usize {
        ((b as usize).wrapping_mul(n) + j) % KEY_SPACE
    }

    /// The entry key the backend writes for user key `u` (identical bytes, from the public layout).
    fn entry_key(&self, kind: Kind, u: usize) -> Vec<u8> {
        let field;
        let (state, sub_key): (&str, &[u8]) = match kind {
            Kind::ValueGetPut => (VALUE_STATE, &[]),
            Kind::MapPut => {
                field = codec::encode(MAP_STATE, &self.fields[u % FIELDS.len()])
                    .expect("a string encodes");
                (MAP_STATE, &field)
            }
        };
        EntryKey {
            job: JOB,
            operator: OPERATOR,
            shard: StateShardId(self.shards[u]),
            state,
            namespace: b"",
            key: &self.keys[u],
            sub_key,
        }
        .encode()
    }
}

fn count_descriptor() -> StateDescriptor<Value<u64>> {
    StateDescriptor::new(VALUE_STATE)
}

fn map_descriptor() -> StateDescriptor<Map<String, f64>> {
    StateDescriptor::new(MAP_STATE)
}

/// The stored form of a payload: no expiry (8 zero bytes), then the payload.
fn stored(buf: &mut Vec<u8>, payload: &[u8]) {
    buf.clear();
    buf.extend_from_slice(&0_u64.to_be_bytes());
    buf.extend_from_slice(payload);
}

/// What the benches share: the input and, where one could be started, a Redis server.
struct Env {
    workload: Workload,
    redis: Option<RedisServer>,
}

impl Env {
    fn new() -> Self {
        let redis = match RedisServer::start() {
            Ok(server) => Some(server),
            Err(e) => {
                eprintln!("NOT RUN: the Redis variant of state_api (no redis-server): {e}");
                None
            }
        };
        Self {
            workload: Workload::new(),
            redis,
        }
    }

    /// The variants this machine can run.
    fn variants(&self) -> Vec<Variant> {
        VARIANTS
            .into_iter()
            .filter(|v| *v != Variant::ApiRedis || self.redis.is_some())
            .collect()
    }

    /// A plain connection to the bench's Redis server (flush, stats, pings).
    fn redis_conn(&self) -> Option<redis::Connection> {
        let server = self.redis.as_ref()?;
        let client = redis::Client::open(server.url()).expect("the Redis URL parses");
        Some(client.get_connection().expect("Redis answers"))
    }
}

/// Calls of the Redis commands the state API sends, read from `INFO commandstats`.
#[derive(Debug, Clone, Copy, Default)]
struct RedisCalls {
    get: u64,
    hget: u64,
    evalsha: u64,
    /// `total_reads_processed` of `INFO stats`: read events on client sockets, about one per
    /// round trip (a large pipeline may take several).
    reads: u64,
}

impl RedisCalls {
    fn read(conn: &mut redis::Connection) -> Self {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(conn)
            .expect("INFO commandstats");
        let calls = |cmd: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(&format!("cmdstat_{cmd}:calls=")))
                .and_then(|rest| rest.split(',').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        };
        let stats: String = redis::cmd("INFO")
            .arg("stats")
            .query(conn)
            .expect("INFO stats");
        let reads = stats
            .lines()
            .find_map(|l| l.strip_prefix("total_reads_processed:"))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0);
        Self {
            get: calls("get"),
            hget: calls("hget"),
            evalsha: calls("evalsha"),
            reads,
        }
    }

    /// Calls per batch between `self` (earlier) and `later`, over `batches` batches.
    fn per_batch(self, later: Self, batches: usize) -> [f64; 4] {
        let b = batches as f64;
        [
            later.get.saturating_sub(self.get) as f64 / b,
            later.hget.saturating_sub(self.hget) as f64 / b,
            later.evalsha.saturating_sub(self.evalsha) as f64 / b,
            later.reads.saturating_sub(self.reads) as f64 / b,
        ]
    }
}

enum Target {
    Api {
        backend: StateBackend,
        store: Box<OperatorStore>,
        /// Sync after every commit, so every batch reaches the engine.
        sync: bool,
    },
    Raw {
        db: Database,
        durability: Durability,
        /// Write each batch in entry-key order rather than arrival order.
        sorted: bool,
        /// Entry keys by user key, built once: the baseline pays for redb only.
        entry_keys: Vec<Vec<u8>>,
        /// The batch's user keys in write order.
        order: Vec<usize>,
        buf: Vec<u8>,
    },
}

/// One state file under test and the batches run against it.
struct Bed {
    target: Target,
    kind: Kind,
    n: usize,
    /// Batches committed since the file was loaded.
    batches: u64,
    _dir: TempDir,
}

impl Bed {
    /// A fresh state holding one entry per user key (count 0, or map value -1.0): a redb file,
    /// or the flushed Redis server of `env`.
    fn new(env: &Env, kind: Kind, variant: Variant, n: usize) -> Self {
        let workload = &env.workload;
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join("state.redb");
        let target = match variant {
            Variant::Api | Variant::ApiSync | Variant::ApiRedis => {
                let clock = Arc::new(ManualClock::new(0));
                let backend = if variant == Variant::ApiRedis {
                    let server = env.redis.as_ref().expect("a Redis server");
                    let mut conn = env.redis_conn().expect("a Redis connection");
                    redis::cmd("FLUSHALL")
                        .query::<()>(&mut conn)
                        .expect("FLUSHALL");
                    let owned: Vec<(OperatorId, StateShardId)> = (0
                        ..weir_plan::DEFAULT_STATE_SHARDS)
                        .map(|s| (OperatorId::new(OPERATOR), StateShardId(s)))
                        .collect();
                    StateBackend::connect_redis(
                        &RedisConfig::new(server.url()),
                        &JobId::new(JOB),
                        &owned,
                        clock,
                    )
                    .expect("Redis connects")
                } else {
                    StateBackend::open_redb(&path, clock).expect("the state file opens")
                };
                let mut store =
                    Box::new(backend.keyed_store(&JobId::new(JOB), &OperatorId::new(OPERATOR)));
                for u in 0..KEY_SPACE {
                    store.set_current_key(&workload.keys[u], StateShardId(workload.shards[u]));
                    match kind {
                        Kind::ValueGetPut => store
                            .value_state(&count_descriptor())
                            .and_then(|mut s| s.update(&0))
                            .expect("preload"),
                        Kind::MapPut => store
                            .map_state(&map_descriptor())
                            .and_then(|mut s| s.put(&workload.fields[u % FIELDS.len()], &-1.0))
                            .expect("preload"),
                    }
                }
                backend.commit().expect("preload commit");
                // The synced variants start with every entry in the engine; `api` keeps its
                // preload in the journal, as it always has (its gets never reach redb).
                if variant != Variant::Api {
                    backend.sync().expect("preload sync");
                }
                Target::Api {
                    backend,
                    store,
                    sync: variant != Variant::Api,
                }
            }
            Variant::Raw | Variant::RawSorted | Variant::RawNoFsync => {
                let db = Database::create(&path).expect("the raw redb file opens");
                let entry_keys: Vec<Vec<u8>> = (0..KEY_SPACE)
                    .map(|u| workload.entry_key(kind, u))
                    .collect();
                let initial = match kind {
                    Kind::ValueGetPut => codec::encode(VALUE_STATE, &0_u64),
                    Kind::MapPut => codec::encode(MAP_STATE, &-1.0_f64),
                }
                .expect("encodes");
                let mut buf = Vec::new();
                stored(&mut buf, &initial);
                let txn = db.begin_write().expect("write txn");
                {
                    let mut table = txn.open_table(RAW_ENTRIES).expect("table");
                    for key in &entry_keys {
                        table
                            .insert(key.as_slice(), buf.as_slice())
                            .expect("insert");
                    }
                }
                txn.commit().expect("preload commit");
                let durability = if variant == Variant::RawNoFsync {
                    Durability::None
                } else {
                    Durability::Immediate
                };
                Target::Raw {
                    db,
                    durability,
                    sorted: variant == Variant::RawSorted,
                    entry_keys,
                    order: Vec::new(),
                    buf,
                }
            }
        };
        Self {
            target,
            kind,
            n,
            batches: 0,
            _dir: dir,
        }
    }

    /// Runs the next batch of `n` records and commits it; returns (staging, commit) time.
    fn batch(&mut self, workload: &Workload) -> (Duration, Duration) {
        let b = self.batches;
        let n = self.n;
        let started = Instant::now();
        let staged;
        match &mut self.target {
            Target::Api {
                backend,
                store,
                sync,
            } => {
                let count = count_descriptor();
                let last = map_descriptor();
                for j in 0..n {
                    let u = Workload::key_index(b, n, j);
                    store.set_current_key(&workload.keys[u], StateShardId(workload.shards[u]));
                    match self.kind {
                        Kind::ValueGetPut => {
                            let mut state = store.value_state(&count).expect("value state");
                            let current = state.value().expect("get").unwrap_or(0);
                            state.update(&(current + 1)).expect("put");
                        }
                        Kind::MapPut => store
                            .map_state(&last)
                            .and_then(|mut s| {
                                s.put(&workload.fields[u % FIELDS.len()], &(b as f64))
                            })
                            .expect("map put"),
                    }
                }
                staged = started.elapsed();
                backend.commit().expect("commit");
                if *sync {
                    backend.sync().expect("sync");
                }
            }
            Target::Raw {
                db,
                durability,
                sorted,
                entry_keys,
                order,
                buf,
            } => {
                order.clear();
                order.extend((0..n).map(|j| Workload::key_index(b, n, j)));
                if *sorted {
                    order.sort_unstable_by(|x, y| entry_keys[*x].cmp(&entry_keys[*y]));
                }
                let mut txn = db.begin_write().expect("write txn");
                txn.set_durability(*durability).expect("durability");
                {
                    let mut table = txn.open_table(RAW_ENTRIES).expect("table");
                    for &u in order.iter() {
                        let key = entry_keys[u].as_slice();
                        let payload = match self.kind {
                            Kind::ValueGetPut => {
                                let current = table
                                    .get(key)
                                    .expect("get")
                                    .map(|g| decode_count(g.value()))
                                    .unwrap_or(0);
                                codec::encode(VALUE_STATE, &(current + 1))
                            }
                            Kind::MapPut => codec::encode(MAP_STATE, &(b as f64)),
                        }
                        .expect("encodes");
                        stored(buf, &payload);
                        table.insert(key, buf.as_slice()).expect("insert");
                    }
                }
                staged = started.elapsed();
                txn.commit().expect("commit");
            }
        }
        self.batches += 1;
        (staged, started.elapsed() - staged)
    }

    /// Checks the file against the batches run; panics on any mismatch.
    fn verify(&mut self, workload: &Workload) {
        let records = self.batches * self.n as u64;
        let job = JobId::new(JOB);
        let op = OperatorId::new(OPERATOR);
        let last_batch = self.batches.checked_sub(1);
        match &mut self.target {
            Target::Api { backend, store, .. } => {
                let view = backend.read_view().expect("read view");
                let state = match self.kind {
                    Kind::ValueGetPut => VALUE_STATE,
                    Kind::MapPut => MAP_STATE,
                };
                let (mut entries, mut sum) = (0_u64, 0_u64);
                for shard in 0..weir_plan::DEFAULT_STATE_SHARDS {
                    for entry in view
                        .scan_state(&job, &op, StateShardId(shard), state)
                        .expect("scan")
                    {
                        let entry = entry.expect("entry");
                        entries += 1;
                        if self.kind == Kind::ValueGetPut {
                            sum += codec::decode::<u64>(state, &entry.payload).expect("count");
                        }
                    }
                }
                assert_eq!(
                    entries, KEY_SPACE as u64,
                    "API entries after {records} records"
                );
                let size = view.state_size(&job, &op, state).expect("size");
                assert_eq!(size.entries, KEY_SPACE as u64, "API size accounting");
                drop(view);
                match self.kind {
                    Kind::ValueGetPut => assert_eq!(sum, records, "API sum of counts"),
                    Kind::MapPut => {
                        let Some(b) = last_batch else { return };
                        for j in [0, self.n / 2, self.n - 1] {
                            let u = Workload::key_index(b, self.n, j);
                            store.set_current_key(
                                &workload.keys[u],
                                StateShardId(workload.shards[u]),
                            );
                            let got = store
                                .map_state(&map_descriptor())
                                .and_then(|mut s| s.get(&workload.fields[u % FIELDS.len()]))
                                .expect("map get");
                            assert_eq!(got, Some(b as f64), "API map value of user {u}");
                        }
                    }
                }
            }
            Target::Raw { db, entry_keys, .. } => {
                let txn = db.begin_read().expect("read txn");
                let table = txn.open_table(RAW_ENTRIES).expect("table");
                assert_eq!(table.len().expect("len"), KEY_SPACE as u64, "raw entries");
                match self.kind {
                    Kind::ValueGetPut => {
                        let mut sum = 0_u64;
                        for item in table.iter().expect("iter") {
                            let (_, v) = item.expect("entry");
                            sum += decode_count(v.value());
                        }
                        assert_eq!(sum, records, "raw sum of counts");
                    }
                    Kind::MapPut => {
                        let Some(b) = last_batch else { return };
                        for j in [0, self.n / 2, self.n - 1] {
                            let u = Workload::key_index(b, self.n, j);
                            let got = table
                                .get(entry_keys[u].as_slice())
                                .expect("get")
                                .map(|g| codec::decode::<f64>(MAP_STATE, &g.value()[8..]))
                                .transpose()
                                .expect("decodes");
                            assert_eq!(got, Some(b as f64), "raw map value of user {u}");
                        }
                    }
                }
            }
        }
    }
}

fn decode_count(stored: &[u8]) -> u64 {
    codec::decode(VALUE_STATE, &stored[8..]).expect("a stored count")
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Median of `PINGS` round trips to the bench's Redis server.
fn ping_round_trip(env: &Env) -> Option<Duration> {
    let mut conn = env.redis_conn()?;
    let times = (0..PINGS)
        .map(|_| {
            let started = Instant::now();
            redis::cmd("PING").query::<String>(&mut conn).expect("PING");
            started.elapsed()
        })
        .collect();
    Some(median(times))
}

/// Interleaved pass: median batch times, API/raw and Redis/redb ratios, Redis commands per
/// batch and the staging/commit split.
fn ratio_report(env: &Env) {
    let workload = &env.workload;
    eprintln!(
        "\nstate_api ratio pass: {KEY_SPACE} keys, {} shards, median per batch over {RATIO_RECORDS} records per variant",
        weir_plan::DEFAULT_STATE_SHARDS
    );
    if let Some(rtt) = ping_round_trip(env) {
        eprintln!(
            "Redis round trip (PING, median of {PINGS}): {:.1} us",
            rtt.as_secs_f64() * 1e6
        );
    }
    eprintln!(
        "{:<14} {:>6} {:<18} {:>10} {:>10} {:>10} {:>12}",
        "kind", "batch", "variant", "stage ms", "commit ms", "total ms", "records/s"
    );
    let variants = env.variants();
    for kind in [Kind::ValueGetPut, Kind::MapPut] {
        for n in BATCH_SIZES {
            let mut beds: Vec<Bed> = variants
                .iter()
                .map(|v| Bed::new(env, kind, *v, n))
                .collect();
            let rounds = (RATIO_RECORDS / n).max(5);
            let mut times: Vec<Vec<(Duration, Duration)>> = vec![Vec::new(); beds.len()];
            let mut stats = env.redis_conn();
            let mut calls_before = RedisCalls::default();
            for round in 0..rounds + 2 {
                if round == 2
                    && let Some(conn) = &mut stats
                {
                    calls_before = RedisCalls::read(conn);
                }
                for (bed, t) in beds.iter_mut().zip(times.iter_mut()) {
                    let split = bed.batch(workload);
                    if round >= 2 {
                        t.push(split);
                    }
                }
            }
            let calls = stats
                .as_mut()
                .map(|conn| calls_before.per_batch(RedisCalls::read(conn), rounds));
            let mut totals = Vec::new();
            for ((bed, t), variant) in beds.iter_mut().zip(&times).zip(&variants) {
                bed.verify(workload);
                let stage = median(t.iter().map(|s| s.0).collect());
                let commit = median(t.iter().map(|s| s.1).collect());
                let total = median(t.iter().map(|s| s.0 + s.1).collect());
                totals.push((*variant, total));
                eprintln!(
                    "{:<14} {:>6} {:<18} {:>10.2} {:>10.2} {:>10.2} {:>12.0}",
                    kind.label(),
                    n,
                    variant.label(),
                    stage.as_secs_f64() * 1e3,
                    commit.as_secs_f64() * 1e3,
                    total.as_secs_f64() * 1e3,
                    n as f64 / total.as_secs_f64()
                );
            }
            let total_of = |v: Variant| {
                totals
                    .iter()
                    .find(|(variant, _)| *variant == v)
                    .map(|(_, t)| t.as_secs_f64())
            };
            // Throughput of `a` as a percentage of `b`'s: b's time over a's.
            let ratio = |a: Variant, b: Variant| -> f64 {
                match (total_of(a), total_of(b)) {
                    (Some(a), Some(b)) => b / a * 100.0,
                    _ => f64::NAN,
                }
            };
            let vs_raw = ratio(Variant::Api, Variant::Raw);
            eprintln!(
                "{:<14} {:>6} API/raw throughput = {vs_raw:.0}% (target >= 70%: {}); \
                 vs sorted raw {:.0}%; vs raw without fsync {:.0}%; api_sync/raw {:.0}%",
                kind.label(),
                n,
                if vs_raw >= 70.0 { "met" } else { "NOT met" },
                ratio(Variant::Api, Variant::RawSorted),
                ratio(Variant::Api, Variant::RawNoFsync),
                ratio(Variant::ApiSync, Variant::Raw),
            );
            match calls {
                Some([get, hget, evalsha, reads]) => eprintln!(
                    "{:<14} {:>6} Redis/redb throughput = {:.0}% of api_sync (both a sync per \
                     batch), {:.0}% of api (redb, commit only); Redis per batch: {get:.0} GET, \
                     {hget:.0} HGET, {evalsha:.0} EVALSHA, {reads:.0} read events",
                    kind.label(),
                    n,
                    ratio(Variant::ApiRedis, Variant::ApiSync),
                    ratio(Variant::ApiRedis, Variant::Api),
                ),
                None => eprintln!(
                    "{:<14} {:>6} NOT RUN: Redis/redb (no redis-server)",
                    kind.label(),
                    n
                ),
            }
        }
    }
    eprintln!();
}

fn state_api(c: &mut Criterion) {
    let env = Env::new();
    let listing = std::env::args().any(|a| a == "--list" || a == "--test");
    if !listing && std::env::var("WEIR_BENCH_RATIO").as_deref() != Ok("0") {
        ratio_report(&env);
    }
    for kind in [Kind::ValueGetPut, Kind::MapPut] {
        let mut group = c.benchmark_group(format!("state_api/{}", kind.label()));
        group
            .sample_size(10)
            .sampling_mode(SamplingMode::Flat)
            .warm_up_time(Duration::from_secs(2))
            .measurement_time(Duration::from_secs(8));
        for n in BATCH_SIZES {
            group.throughput(Throughput::Elements(n as u64));
            for variant in env.variants() {
                // Loaded on first use, so a filtered-out bench costs nothing.
                let mut bed: Option<Bed> = None;
                group.bench_function(BenchmarkId::new(variant.label(), n), |b| {
                    let bed = bed.get_or_insert_with(|| Bed::new(&env, kind, variant, n));
                    b.iter(|| black_box(bed.batch(&env.workload)));
                });
                if let Some(bed) = &mut bed {
                    bed.verify(&env.workload);
                }
            }
        }
        group.finish();
    }
}

criterion_group!(benches, state_api);
criterion_main!(benches);
