//! Throughput of the Kafka connector against one real broker (`weir_testkit::kafka`), through
//! the crate's public API (`KafkaSourceFactory`, `KafkaSinkFactory` and the `weir_api` traits),
//! without the runtime or DataFusion in the loop.
//!
//! Input: `WEIR_BENCH_KAFKA_RECORDS` (default 200,000) JSON bid records of about 100 bytes
//! over 4 partitions, produced once at the start. Then:
//!
//! 1. **read + JSON decode** (criterion, `Throughput::Elements`): a bounded source
//!    (`'scan.bounded.mode' = 'latest-offset'`) reads the whole topic, its 4 split readers
//!    driven concurrently; the time runs from the open readers to the last batch (preparing
//!    the source and opening its readers is timed apart). Next to it, a bare rdkafka consumer
//!    reading the same records without decoding them.
//! 2. **Kafka -> filter -> Kafka**, `price >= 500` (about half the records), 3 runs each:
//!    (a) a bare rdkafka loop: a consumer, `serde_json` to read the price, a plain producer
//!    copying the record, one flush at the end; (b) Weir's connector path: the split readers,
//!    `arrow::compute::filter_record_batch`, the exactly-once sink writer, with `pre_commit`
//!    every second of wall time and `commit_epoch` in a separate task (as the checkpoint
//!    coordinator runs it), until the last epoch is committed. Both clocks start once the
//!    clients are ready (transactions initialized). Every run's output is counted once with a
//!    read_committed consumer, outside the timing.
//! 3. **consumer lag under a burst**: an unbounded source reads one partition while 100,000
//!    records are produced as fast as possible; the backlog the reader reports
//!    (`SplitBatch::backlog`) and the true lag (records acknowledged by the broker minus records
//!    read) are sampled until the reader has read every record.
//!
//! 4. **the same through the whole engine** (`kafka/runtime.rs`): SQL jobs run by a `weir`
//!    binary named in `WEIR_BENCH_KAFKA_WEIR`: Kafka -> filter -> Kafka exactly once against
//!    the bare loop of part 2, and Kafka -> tumbling window -> Parquet.
//! 5. **Kafka -> Delta Lake against Kafka -> Parquet** (`kafka/delta.rs`), through the same
//!    `weir` binary: throughput and commit latency per epoch; part 6, the files a steady
//!    stream leaves in a Parquet and a Delta table at 1 s checkpoints.
//!
//! Run: `nice -n 19 cargo bench -p weir-kafka --bench kafka` (a few minutes).
//! `WEIR_BENCH_KAFKA_PARTS` picks the parts (default `123`, `1234` when
//! `WEIR_BENCH_KAFKA_WEIR` is set; parts 5 and 6 only when named), `WEIR_BENCH_KAFKA_RECORDS` the input size.

use std::collections::BTreeSet;
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use arrow::array::{Array, Int64Array};
use arrow::compute::filter_record_batch;
use arrow::compute::kernels::cmp::gt_eq;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use criterion::{Criterion, SamplingMode, Throughput};
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::{ClientConfig, ClientContext, Offset, TopicPartitionList};
use weir_api::{
    BadRecordPolicy, ConnectorSpec, Epoch, JobId, OperatorId, PreparedSink, PreparedSource,
    SinkFactory, SinkStaging, SourceFactory, SplitReader, SubtaskIndex, TaskContext,
};
use weir_kafka::{KafkaSinkFactory, KafkaSourceFactory};
use weir_testkit::kafka::KafkaBroker;
use weir_testkit::unique_name;

/// Part 5.
#[path = "kafka/delta.rs"]
mod delta;
/// Part 3.
#[path = "kafka/lag.rs"]
mod lag;
/// Part 4.
#[path = "kafka/runtime.rs"]
mod runtime;

/// Partitions of the input topic (and of every output topic).
const PARTITIONS: i32 = 4;
/// Records of the lag burst.
const BURST: u64 = 100_000;
/// The filter keeps records whose price is at least this (prices are 0..1000).
const PRICE_CUT: i64 = 500;
/// Wall time between two checkpoint barriers of the exactly-once path.
const EPOCH: Duration = Duration::from_secs(1);
/// Runs of each side of the filter comparison.
const RUNS: usize = 3;

type BenchResult<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// A splitmix64 step: deterministic pseudo-random values without a `rand` dependency.
fn mix(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The price of bid `i`.
fn price(i: u64) -> i64 {
    i64::try_from((mix(i) >> 32) % 1000).unwrap_or(0)
}

/// Bid `i` as JSON (about 100 bytes).
fn bid_json(i: u64) -> Vec<u8> {
    let r = mix(i);
    format!(
        r#"{{"auction":{},"bidder":{},"price":{},"channel":"ch-{}","url":"https://b.example/i/{:05}","ts":{}}}"#,
        1000 + r % 10_000,
        10_000 + (r >> 16) % 100_000,
        price(i),
        (r >> 42) % 4,
        (r >> 44) % 100_000,
        1_733_100_000_000 + i
    )
    .into_bytes()
}

/// The declared schema of the bid records.
fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("auction", DataType::Int64, true),
        Field::new("bidder", DataType::Int64, true),
        Field::new("price", DataType::Int64, true),
        Field::new("channel", DataType::Utf8, true),
        Field::new("url", DataType::Utf8, true),
        Field::new("ts", DataType::Int64, true),
    ]))
}

/// Counts the deliveries of a plain producer.
#[derive(Default)]
struct Counting {
    delivered: AtomicU64,
    failed: AtomicU64,
}

impl ClientContext for Counting {}

impl ProducerContext for Counting {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: Self::DeliveryOpaque) {
        match result {
            Ok(_) => self.delivered.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.failed.fetch_add(1, Ordering::Relaxed),
        };
    }
}

/// A plain (non-transactional) producer that counts its deliveries.
fn plain_producer(servers: &str) -> BenchResult<ThreadedProducer<Counting>> {
    Ok(ClientConfig::new()
        .set("bootstrap.servers", servers)
        .set("queue.buffering.max.messages", "1000000")
        .create_with_context(Counting::default())?)
}

/// Hands `record` to `producer`, waiting while its queue is full.
fn send(
    producer: &ThreadedProducer<Counting>,
    mut record: BaseRecord<'_, (), [u8]>,
) -> BenchResult<()> {
    loop {
        match producer.send(record) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                record = r;
                std::thread::sleep(Duration::from_millis(1));
            }
            Err((e, _)) => return Err(e.into()),
        }
    }
}

/// Flushes `producer` and fails when a record was not delivered.
fn flush(producer: &ThreadedProducer<Counting>) -> BenchResult<()> {
    producer.flush(Duration::from_secs(120))?;
    let failed = producer.context().failed.load(Ordering::Relaxed);
    if failed > 0 {
        return Err(format!("{failed} records were not delivered").into());
    }
    Ok(())
}

/// Produces bids `first..first + count` to `topic`, round robin over `partitions` (or to the
/// broker's choice with `None`); returns how many pass the filter.
fn produce_bids(
    servers: &str,
    topic: &str,
    first: u64,
    count: u64,
    partitions: Option<i32>,
) -> BenchResult<u64> {
    let producer = plain_producer(servers)?;
    let mut passing = 0;
    for i in first..first + count {
        let value = bid_json(i);
        if price(i) >= PRICE_CUT {
            passing += 1;
        }
        let mut record = BaseRecord::to(topic).payload(value.as_slice());
        if let Some(n) = partitions {
            record = record.partition(i32::try_from(i % u64::try_from(n)?)?);
        }
        send(&producer, record)?;
    }
    flush(&producer)?;
    Ok(passing)
}

/// A consumer of its own group assigned to every partition of `topic` from the beginning,
/// reporting the end of each partition.
fn bare_consumer(servers: &str, topic: &str) -> BenchResult<BaseConsumer> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", servers)
        .set("group.id", unique_name("kbench-bare"))
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("isolation.level", "read_committed")
        .create()?;
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset(topic, p, Offset::Beginning)?;
    }
    consumer.assign(&tpl)?;
    Ok(consumer)
}

/// Reads `topic` to the end of every partition with a bare consumer, calling `each` on every
/// payload; returns the records read.
fn bare_read(
    consumer: &BaseConsumer,
    mut each: impl FnMut(&[u8]) -> BenchResult<()>,
) -> BenchResult<u64> {
    let mut at_end = BTreeSet::new();
    let mut read = 0;
    while at_end.len() < PARTITIONS as usize {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                read += 1;
                each(m.payload().unwrap_or_default())?;
            }
            Some(Err(KafkaError::PartitionEOF(p))) => {
                at_end.insert(p);
            }
            Some(Err(e)) => return Err(e.into()),
            None => {}
        }
    }
    Ok(read)
}

/// The options of a kafka source reading `topic` from its beginning.
fn source_options(servers: &str, topic: &str, bounded: bool) -> serde_json::Value {
    let mut options = serde_json::json!({
        "topic": topic,
        "properties.bootstrap.servers": servers,
        "format": "json",
        "scan.startup.mode": "earliest-offset",
    });
    if bounded {
        options["scan.bounded.mode"] = "latest-offset".into();
    }
    options
}

/// A prepared kafka source.
async fn prepare_source(options: &serde_json::Value) -> BenchResult<Arc<dyn PreparedSource>> {
    let operator = OperatorId::new(unique_name("kbench-source"));
    Ok(KafkaSourceFactory
        .prepare(ConnectorSpec {
            operator_id: &operator,
            options,
            options_path: "sources[0].options",
            schema: Some(schema()),
            bad_records: BadRecordPolicy::Fail,
            reach: weir_api::Reach::Full,
        })
        .await?)
}

/// The split readers of every partition of a prepared source (subtask 0 of 1).
async fn open_readers(source: &dyn PreparedSource) -> BenchResult<Vec<Box<dyn SplitReader>>> {
    let ctx = TaskContext::new(
        JobId::new("kbench"),
        OperatorId::new("source"),
        SubtaskIndex(0),
        1,
    );
    let mut readers = Vec::new();
    for split in source.enumerate_splits().await? {
        readers.push(source.open_split(&split, &ctx).await?);
    }
    Ok(readers)
}

/// Drives every reader to its end concurrently, sending each batch to `out`; returns the rows.
async fn drive(
    readers: Vec<Box<dyn SplitReader>>,
    out: Option<tokio::sync::mpsc::Sender<RecordBatch>>,
) -> BenchResult<u64> {
    let mut tasks = Vec::new();
    for mut reader in readers {
        let out = out.clone();
        tasks.push(tokio::spawn(async move {
            let mut rows = 0u64;
            while let Some(batch) = reader.next_batch().await? {
                rows += batch.data.num_rows() as u64;
                match &out {
                    Some(out) => {
                        if out.send(batch.data).await.is_err() {
                            break;
                        }
                    }
                    None => {
                        black_box(&batch.data);
                    }
                }
            }
            BenchResult::Ok(rows)
        }));
    }
    drop(out);
    let mut rows = 0;
    for t in tasks {
        rows += t.await??;
    }
    Ok(rows)
}

/// Shared state of the whole bench.
struct Bench {
    broker: KafkaBroker,
    servers: String,
    input: String,
    records: u64,
    passing: u64,
    staging_root: PathBuf,
}

/// Part 1: one bounded read of the whole input; returns (setup, read) times.
async fn read_input(bench: &Bench) -> BenchResult<(Duration, Duration)> {
    let start = Instant::now();
    let source = prepare_source(&source_options(&bench.servers, &bench.input, true)).await?;
    let readers = open_readers(source.as_ref()).await?;
    let setup = start.elapsed();
    let start = Instant::now();
    let rows = drive(readers, None).await?;
    let read = start.elapsed();
    if rows != bench.records {
        return Err(format!("the source read {rows} rows of {}", bench.records).into());
    }
    Ok((setup, read))
}

/// Part 1, the reference: a bare consumer reading the input without decoding it.
fn bare_consume(bench: &Bench) -> BenchResult<Duration> {
    let consumer = bare_consumer(&bench.servers, &bench.input)?;
    let start = Instant::now();
    let mut bytes = 0usize;
    let read = bare_read(&consumer, |p| {
        bytes += p.len();
        Ok(())
    })?;
    black_box(bytes);
    if read != bench.records {
        return Err(format!("the bare consumer read {read} records of {}", bench.records).into());
    }
    Ok(start.elapsed())
}

/// The price field of a record, for the bare loop.
#[derive(serde::Deserialize)]
struct PriceOnly {
    price: i64,
}

/// Part 2a: the bare rdkafka loop into `output`; returns its time.
fn bare_filter(bench: &Bench, output: &str) -> BenchResult<Duration> {
    let consumer = bare_consumer(&bench.servers, &bench.input)?;
    let producer = plain_producer(&bench.servers)?;
    let start = Instant::now();
    bare_read(&consumer, |p| {
        let bid: PriceOnly = serde_json::from_slice(p)?;
        if bid.price >= PRICE_CUT {
            send(&producer, BaseRecord::to(output).payload(p))?;
        }
        Ok(())
    })?;
    flush(&producer)?;
    Ok(start.elapsed())
}

/// Where the time of one run of the exactly-once path went.
#[derive(Debug, Default, Clone, Copy)]
struct Breakdown {
    setup: Duration,
    total: Duration,
    /// In the pipeline task: filter and `write_batch`.
    filter_write: Duration,
    /// In the pipeline task: `pre_commit` (staging as Arrow IPC, fsync).
    pre_commit: Duration,
    /// In the committer task: `commit_epoch` (read staged, encode, produce, commit).
    commit: Duration,
    /// From the end of the input to the last commit.
    tail: Duration,
    epochs: u64,
}

/// Keeps the rows whose price passes the filter.
fn filter_bids(batch: &RecordBatch) -> BenchResult<RecordBatch> {
    let price = batch
        .column_by_name("price")
        .ok_or("no price column")?
        .as_any()
        .downcast_ref::<Int64Array>()
        .ok_or("price is not Int64")?;
    let keep = gt_eq(price, &Int64Array::new_scalar(PRICE_CUT))?;
    Ok(filter_record_batch(batch, &keep)?)
}

/// Part 2b: source -> filter -> exactly-once sink into `output`.
async fn weir_filter(bench: &Bench, output: &str) -> BenchResult<Breakdown> {
    let setup_start = Instant::now();
    let source = prepare_source(&source_options(&bench.servers, &bench.input, true)).await?;
    let prefix = unique_name("kbench-eo");
    let sink_options = serde_json::json!({
        "topic": output,
        "properties.bootstrap.servers": bench.servers,
        "format": "json",
        "sink.delivery-guarantee": "exactly-once",
        "sink.transactional-id-prefix": prefix,
    });
    let sink_operator = OperatorId::new("sink");
    let sink: Arc<dyn PreparedSink> = KafkaSinkFactory
        .prepare(
            ConnectorSpec {
                operator_id: &sink_operator,
                options: &sink_options,
                options_path: "sinks[0].options",
                schema: None,
                bad_records: BadRecordPolicy::Fail,
                reach: weir_api::Reach::Full,
            },
            schema(),
        )
        .await?;
    let root = bench.staging_root.join(&prefix);
    std::fs::create_dir_all(&root)?;
    let ctx = TaskContext {
        staging: Some(SinkStaging {
            store: Arc::new(LocalFileSystem::new_with_prefix(&root)?),
            dir: ObjectPath::from("staging/sink/0"),
            local_root: Some(root.clone()),
        }),
        ..TaskContext::new(
            JobId::new(prefix.clone()),
            sink_operator,
            SubtaskIndex(0),
            1,
        )
    };
    // As at a job's start: fences older producers, initializes the transactions.
    sink.abort_uncommitted(&ctx, &[]).await?;
    let mut writer = sink.create_writer(&ctx).await?;
    writer.begin_epochs().await?;
    let readers = open_readers(source.as_ref()).await?;
    let mut out = Breakdown {
        setup: setup_start.elapsed(),
        ..Breakdown::default()
    };

    let start = Instant::now();
    let (batches_tx, mut batches) = tokio::sync::mpsc::channel::<RecordBatch>(8);
    let reading = tokio::spawn(drive(readers, Some(batches_tx)));
    let (commits_tx, mut commits) = tokio::sync::mpsc::unbounded_channel::<serde_json::Value>();
    let committer = {
        let (sink, ctx) = (sink.clone(), ctx.clone());
        tokio::spawn(async move {
            let mut busy = Duration::ZERO;
            while let Some(first) = commits.recv().await {
                // Like the coordinator: every epoch pending by now in one call.
                let mut pending = vec![first];
                while let Ok(more) = commits.try_recv() {
                    pending.push(more);
                }
                let t = Instant::now();
                sink.commit_epoch(&ctx, &pending).await?;
                busy += t.elapsed();
            }
            BenchResult::Ok(busy)
        })
    };
    let mut barrier = tokio::time::interval_at(tokio::time::Instant::now() + EPOCH, EPOCH);
    let mut epoch = 0;
    loop {
        tokio::select! {
            batch = batches.recv() => {
                let Some(batch) = batch else { break };
                let t = Instant::now();
                let kept = filter_bids(&batch)?;
                writer.write_batch(kept).await?;
                out.filter_write += t.elapsed();
            }
            _ = barrier.tick() => {
                epoch += 1;
                let t = Instant::now();
                let value = writer.pre_commit(Epoch(epoch)).await?;
                out.pre_commit += t.elapsed();
                commits_tx.send(value)?;
            }
        }
    }
    let input_done = Instant::now();
    let read = reading.await??;
    if read != bench.records {
        return Err(format!("the source read {read} rows of {}", bench.records).into());
    }
    epoch += 1;
    let t = Instant::now();
    let value = writer.pre_commit(Epoch(epoch)).await?;
    out.pre_commit += t.elapsed();
    commits_tx.send(value)?;
    drop(commits_tx);
    out.commit = committer.await??;
    out.total = start.elapsed();
    out.tail = input_done.elapsed();
    out.epochs = epoch;
    writer.finish().await?;
    drop(writer);
    std::fs::remove_dir_all(&root)?;
    Ok(out)
}

/// Counts the committed records of `topic` (outside the timing).
fn verify(bench: &Bench, topic: &str, what: &str) -> BenchResult<()> {
    let got = bench.broker.read_committed(topic)?.len() as u64;
    if got != bench.passing {
        return Err(format!(
            "{what}: {topic} holds {got} committed records, expected {}",
            bench.passing
        )
        .into());
    }
    Ok(())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> BenchResult<()> {
    let records: u64 = std::env::var("WEIR_BENCH_KAFKA_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let broker = KafkaBroker::start()?;
    let servers = broker.bootstrap_servers();
    let input = unique_name("kbench-bids");
    broker.create_topic(&input, PARTITIONS)?;
    let t = Instant::now();
    let passing = produce_bids(&servers, &input, 0, records, Some(PARTITIONS))?;
    let bytes: usize = (0..1000).map(|i| bid_json(i).len()).sum();
    println!(
        "input: {records} JSON bids (~{} bytes each) over {PARTITIONS} partitions, produced in {:.2} s; {passing} pass price >= {PRICE_CUT}",
        bytes / 1000,
        t.elapsed().as_secs_f64()
    );
    let bench = Bench {
        broker,
        servers,
        input,
        records,
        passing,
        staging_root: std::env::temp_dir().join(unique_name("kbench-staging")),
    };

    // Which parts run: `WEIR_BENCH_KAFKA_PARTS` (default "123", and 4 when a `weir` binary is
    // named), e.g. "2" under `perf`.
    let weir = std::env::var_os("WEIR_BENCH_KAFKA_WEIR").map(PathBuf::from);
    let parts = std::env::var("WEIR_BENCH_KAFKA_PARTS")
        .unwrap_or_else(|_| if weir.is_some() { "1234" } else { "123" }.into());
    let mut criterion = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(10))
        .configure_from_args();
    if parts.contains('1') {
        read_and_decode(&bench, &rt, &mut criterion);
    }
    if parts.contains('2') {
        filter_comparison(&bench, &rt)?;
    }
    if parts.contains('3') {
        rt.block_on(lag::burst(&bench))?;
    }
    if parts.contains('4') {
        let weir = weir.ok_or(
            "part 4 runs jobs with `weir run`: set WEIR_BENCH_KAFKA_WEIR to a weir binary \
             (`cargo build --release -p weir-cli`, then target/release/weir)",
        )?;
        runtime::through_weir_run(&bench, &weir)?;
    }
    if parts.contains('5') {
        let weir = std::env::var_os("WEIR_BENCH_KAFKA_WEIR")
            .map(PathBuf::from)
            .ok_or(
                "part 5 runs jobs with `weir run`: set WEIR_BENCH_KAFKA_WEIR to a weir binary",
            )?;
        delta::delta_against_parquet(&bench, &weir)?;
    }
    if parts.contains('6') {
        let weir = std::env::var_os("WEIR_BENCH_KAFKA_WEIR")
            .map(PathBuf::from)
            .ok_or(
                "part 6 runs jobs with `weir run`: set WEIR_BENCH_KAFKA_WEIR to a weir binary",
            )?;
        delta::small_files(&bench, &weir)?;
    }
    criterion.final_summary();
    let _ = std::fs::remove_dir_all(&bench.staging_root);
    Ok(())
}

/// Part 1 under criterion, then its table.
fn read_and_decode(bench: &Bench, rt: &tokio::runtime::Runtime, criterion: &mut Criterion) {
    let records = bench.records;
    let mut setups = Vec::new();
    let mut reads = Vec::new();
    let mut bare = Vec::new();
    let mut group = criterion.benchmark_group("kafka_read");
    group.throughput(Throughput::Elements(records));
    // Every sample the same number of whole-topic reads (10 reads at the least).
    group.sampling_mode(SamplingMode::Flat);
    group.bench_function("source_json_decode", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let (setup, read) = rt.block_on(read_input(bench)).expect("bounded read");
                setups.push(setup.as_secs_f64());
                reads.push(records as f64 / read.as_secs_f64());
                total += read;
            }
            total
        });
    });
    group.bench_function("bare_consume_no_decode", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let read = bare_consume(bench).expect("bare read");
                bare.push(records as f64 / read.as_secs_f64());
                total += read;
            }
            total
        });
    });
    group.finish();
    println!();
    println!(
        "## 1. read + JSON decode, {records} records, 4 partitions (median over every timed read)"
    );
    println!("{:<44} {:>14}", "path", "records/s");
    println!(
        "{:<44} {:>14.0}",
        "weir source, bounded, 4 split readers",
        median(reads)
    );
    println!(
        "{:<44} {:>14.0}",
        "bare rdkafka consumer, no decode",
        median(bare)
    );
    println!(
        "source setup (prepare, enumerate, open 4 splits): median {:.3} s",
        median(setups)
    );
}

/// Part 2: [`RUNS`] interleaved runs of each side, then the table.
fn filter_comparison(bench: &Bench, rt: &tokio::runtime::Runtime) -> BenchResult<()> {
    let (records, passing) = (bench.records, bench.passing);
    let mut bare_rates = Vec::new();
    let mut weir_rates = Vec::new();
    let mut breakdowns = Vec::new();
    for run in 0..RUNS {
        let output = unique_name("kbench-bare-out");
        bench.broker.create_topic(&output, PARTITIONS)?;
        let took = bare_filter(bench, &output)?;
        if run == 0 {
            verify(bench, &output, "bare loop")?;
        }
        bare_rates.push(records as f64 / took.as_secs_f64());

        let output = unique_name("kbench-eo-out");
        bench.broker.create_topic(&output, PARTITIONS)?;
        let b = rt.block_on(weir_filter(bench, &output))?;
        if run == 0 {
            verify(bench, &output, "exactly-once path")?;
        }
        weir_rates.push(records as f64 / b.total.as_secs_f64());
        breakdowns.push(b);
    }
    println!();
    println!(
        "## 2. Kafka -> filter (price >= {PRICE_CUT}) -> Kafka, {records} input records, {passing} out, {RUNS} runs"
    );
    println!("{:<44} {:>14} {:>22}", "path", "median rec/s", "runs");
    let fmt_runs = |v: &[f64]| {
        v.iter()
            .map(|r| format!("{r:.0}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    println!(
        "{:<44} {:>14.0} {:>22}",
        "(a) bare rdkafka loop, plain producer",
        median(bare_rates.clone()),
        fmt_runs(&bare_rates)
    );
    println!(
        "{:<44} {:>14.0} {:>22}",
        "(b) weir source -> filter -> exactly-once",
        median(weir_rates.clone()),
        fmt_runs(&weir_rates)
    );
    println!(
        "ratio (b)/(a): {:.2} (target >= 0.70)",
        median(weir_rates) / median(bare_rates)
    );
    println!(
        "exactly-once runs (s): setup | total | filter+write_batch | pre_commit | commit_epoch (committer task) | input end -> last commit | epochs"
    );
    for b in &breakdowns {
        println!(
            "  {:.2} | {:.2} | {:.3} | {:.3} | {:.3} | {:.3} | {}",
            b.setup.as_secs_f64(),
            b.total.as_secs_f64(),
            b.filter_write.as_secs_f64(),
            b.pre_commit.as_secs_f64(),
            b.commit.as_secs_f64(),
            b.tail.as_secs_f64(),
            b.epochs
        );
    }
    Ok(())
}
