//! Part 5 of the Kafka bench: Kafka -> Delta Lake against Kafka -> Parquet, through the whole
//! engine (`weir run`, the binary in `WEIR_BENCH_KAFKA_WEIR`), and the small files of a Delta
//! table at 1 s checkpoints.
//!
//! **5a, throughput.** The bench's input topic read by the same SQL jobs that differ only in the
//! sink table (`'connector' = 'filesystem', 'format' = 'parquet'` against `'connector' =
//! 'delta'`), checkpoints every second into a fresh local directory, parallelism 2,
//! [`RUNS`] interleaved rounds (the order of the two sinks alternating):
//! - `copy`: `INSERT INTO out SELECT * FROM bids` (every record is written: the sink's cost
//!   shows most here);
//! - `window`: part 4's (c), a 10-second tumbling window counting bids per auction.
//!
//! With `WEIR_BENCH_KAFKA_S3=1` the `copy` pair runs again with the table on the test kit's
//! S3 server (`weir_testkit::s3`, moto unless `WEIR_TEST_S3_ENDPOINT` names another server;
//! the checkpoints stay local). Every run must read every record and write the rows expected
//! (the summary's counters; for a Delta table also the `numRecords` of its live files).
//!
//! Commit latency per epoch: the time from an epoch's DURABLE record to its COMMITTED record in
//! the job's epoch log (`checkpoint/*/log/{epoch}-{STATE}.json`, `atMs`): the sink's commit
//! (for Delta, the one Delta commit of the epoch, and compaction when it is on) plus writing the
//! DURABLE record. The jobs keep every checkpoint (`checkpoint.retain`) so that no log record
//! is removed before it is read.
//!
//! **5b, small files** (`WEIR_BENCH_KAFKA_DELTA_MINUTES` > 0): an unbounded job copies a topic
//! that a producer fills at `WEIR_BENCH_KAFKA_DELTA_RATE` records/s (default 5,000) into a
//! Parquet table and a Delta table, checkpoints every second, parallelism 2, for that many
//! minutes, each without and with `'auto-compaction' = 'true'`; then the job is killed (its
//! PID) and the table's log (Delta) or its published part files (Parquet) are read: commits,
//! files added, live files and their sizes, bytes written; scaled to an hour.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rdkafka::producer::BaseRecord;
use weir_testkit::unique_name;

use super::{Bench, BenchResult, PARTITIONS, RUNS, bid_json, flush, median, plain_producer, send};

/// Rounds of 5a: `WEIR_BENCH_KAFKA_DELTA_ROUNDS`, default [`RUNS`].
fn rounds() -> usize {
    std::env::var("WEIR_BENCH_KAFKA_DELTA_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(RUNS)
}

/// Width of the tumbling window of `window`, in seconds of event time.
const WINDOW_S: u64 = 10;

/// Where a sink table lives.
#[derive(Clone)]
enum Place {
    Local(PathBuf),
    /// `s3://bucket/prefix` and the server's endpoint.
    S3 {
        url: String,
        endpoint: String,
    },
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sink {
    Parquet,
    Delta,
}

impl Sink {
    fn name(self) -> &'static str {
        match self {
            Sink::Parquet => "Parquet",
            Sink::Delta => "Delta",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Job {
    Copy,
    Window,
}

/// One `weir run`: its summary's figures and the epochs' commit latencies.
struct Run {
    process_secs: f64,
    /// User + system CPU seconds of the job's process.
    cpu_secs: f64,
    engine_secs: f64,
    source_rows: u64,
    sink_rows: u64,
    peak_rss_mb: f64,
    checkpoints: u64,
    /// DURABLE -> COMMITTED of every epoch, ms.
    commit_ms: Vec<f64>,
    /// Data files the sink left (live Delta files, or part files), and their bytes.
    files: usize,
    bytes: u64,
}

/// The `WITH` options of the sink table.
fn sink_with(sink: Sink, place: &Place, extra: &str) -> String {
    let connector = match sink {
        Sink::Parquet => "'connector' = 'filesystem', 'format' = 'parquet'",
        Sink::Delta => "'connector' = 'delta'",
    };
    match place {
        Place::Local(path) => format!("{connector}, 'path' = '{}'{extra}", path.display()),
        Place::S3 { url, endpoint } => format!(
            "{connector}, 'path' = '{url}'{extra},\n  's3.endpoint' = '{endpoint}', \
             's3.region' = '{}', 's3.access-key' = '{}', 's3.secret-key' = '{}', \
             's3.path.style.access' = 'true'",
            weir_testkit::s3::REGION,
            weir_testkit::s3::ACCESS_KEY_ID,
            weir_testkit::s3::SECRET_ACCESS_KEY,
        ),
    }
}

/// The source table: the bench's topic (or `topic`), bounded by its latest offsets or not.
fn bids_table(servers: &str, topic: &str, bounded: bool, watermark: bool) -> String {
    let time = if watermark {
        ",\n  et AS TO_TIMESTAMP_MILLIS(ts),\n  WATERMARK FOR et AS et - INTERVAL '1' SECOND"
    } else {
        ""
    };
    let bound = if bounded {
        ", 'scan.bounded.mode' = 'latest-offset'"
    } else {
        ""
    };
    format!(
        "CREATE TABLE bids (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, \
         url STRING, ts BIGINT{time}\n) WITH ('connector' = 'kafka', 'topic' = '{topic}',\n  \
         'properties.bootstrap.servers' = '{servers}', 'format' = 'json',\n  \
         'scan.startup.mode' = 'earliest-offset'{bound});\n"
    )
}

/// The job's settings: checkpoints every second, all of them kept (so the epoch log is whole).
fn settings(name: &str, checkpoints: &Path) -> String {
    format!(
        "SET 'job.name' = '{}';\nSET 'parallelism' = '2';\n\
         SET 'checkpoint.interval' = '1s';\nSET 'checkpoint.retain' = '1000000';\n\
         SET 'checkpoint.dir' = '{}';\n",
        unique_name(name),
        checkpoints.display()
    )
}

/// The topic a job reads, and whether it stops at the offsets latest at its start.
struct Input<'a> {
    servers: &'a str,
    topic: &'a str,
    bounded: bool,
}

/// The SQL of `job` into `sink` at `place` (`extra`: more `WITH` options of the sink).
fn job_sql(
    input: &Input<'_>,
    (job, sink): (Job, Sink),
    place: &Place,
    extra: &str,
    checkpoints: &Path,
) -> String {
    let (servers, topic, bounded) = (input.servers, input.topic, input.bounded);
    let with = sink_with(sink, place, extra);
    match job {
        Job::Copy => format!(
            "{}{}CREATE TABLE out (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, \
             url STRING, ts BIGINT) WITH (\n  {with});\n\
             INSERT INTO out SELECT auction, bidder, price, channel, url, ts FROM bids;\n",
            settings("kbench-delta-copy", checkpoints),
            bids_table(servers, topic, bounded, false),
        ),
        Job::Window => format!(
            "{}{}CREATE TABLE out (auction BIGINT, window_start TIMESTAMP(3), bids BIGINT, \
             max_price BIGINT) WITH (\n  {with});\n\
             INSERT INTO out SELECT auction, window_start, COUNT(*), MAX(price)\n\
             FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(et), INTERVAL '{WINDOW_S}' SECOND))\n\
             GROUP BY auction, window_start, window_end;\n",
            settings("kbench-delta-window", checkpoints),
            bids_table(servers, topic, bounded, true),
        ),
    }
}

/// Runs `sql` with `weir run --json` to its end.
fn weir_run(weir: &Path, sql: &str, dir: &Path) -> BenchResult<Run> {
    let file = dir.join("job.sql");
    std::fs::write(&file, sql)?;
    // CPU time of the job's process, when GNU time is there.
    let cpu_file = dir.join("cpu");
    let time = Path::new("/usr/bin/time");
    let mut command = if time.exists() {
        let mut c = Command::new(time);
        c.arg("-f").arg("%U %S").arg("-o").arg(&cpu_file).arg(weir);
        c
    } else {
        Command::new(weir)
    };
    let start = Instant::now();
    let output = command.arg("run").arg("--json").arg(&file).output()?;
    let process_secs = start.elapsed().as_secs_f64();
    let cpu_secs = std::fs::read_to_string(&cpu_file)
        .ok()
        .and_then(|t| {
            let mut parts = t.split_whitespace().map(str::parse::<f64>);
            Some(parts.next()?.ok()? + parts.next()?.ok()?)
        })
        .unwrap_or(f64::NAN);
    if !output.status.success() {
        return Err(format!(
            "`{} run {}` failed ({}): {}",
            weir.display(),
            file.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let number = |key: &str| {
        summary[key]
            .as_f64()
            .ok_or(format!("no `{key}` in {summary}"))
    };
    Ok(Run {
        process_secs,
        cpu_secs,
        engine_secs: number("wall_time_secs")?,
        source_rows: number("source_rows")? as u64,
        sink_rows: number("sink_rows")? as u64,
        peak_rss_mb: summary["peak_rss_bytes"].as_f64().unwrap_or(0.0) / 1e6,
        checkpoints: summary["checkpoints"]["completed"].as_u64().unwrap_or(0),
        commit_ms: commit_latencies(&dir.join("cp"))?,
        files: 0,
        bytes: 0,
    })
}

/// Every file below `dir`, recursively.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> BenchResult<()> {
    if !dir.exists() {
        return Ok(());
    }
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            walk(&path, out)?;
        } else {
            out.push(path);
        }
    }
    Ok(())
}

/// DURABLE -> COMMITTED of every epoch in the epoch logs below `checkpoints`, in ms.
fn commit_latencies(checkpoints: &Path) -> BenchResult<Vec<f64>> {
    let mut files = Vec::new();
    walk(checkpoints, &mut files)?;
    // (log directory, epoch) -> (durable, committed)
    let mut at: HashMap<(PathBuf, u64), (Option<u64>, Option<u64>)> = HashMap::new();
    for file in files {
        let Some(name) = file.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let durable = name.ends_with("-DURABLE.json");
        if !durable && !name.ends_with("-COMMITTED.json") {
            continue;
        }
        let record: serde_json::Value = serde_json::from_slice(&std::fs::read(&file)?)?;
        let (Some(epoch), Some(at_ms)) = (record["epoch"].as_u64(), record["atMs"].as_u64()) else {
            return Err(format!("unexpected epoch log record {}", file.display()).into());
        };
        let dir = file.parent().map(Path::to_path_buf).unwrap_or_default();
        let entry = at.entry((dir, epoch)).or_default();
        if durable {
            entry.0 = Some(at_ms);
        } else {
            entry.1 = Some(at_ms);
        }
    }
    Ok(at
        .values()
        .filter_map(|(d, c)| Some(c.as_ref()?.saturating_sub(*d.as_ref()?) as f64))
        .collect())
}

/// What a Delta table's log says: replayed from its JSON commits.
#[derive(Default)]
struct DeltaLog {
    /// Commits by `commitInfo.operation`.
    commits: BTreeMap<String, u64>,
    /// Every `add`: how many and their bytes (compaction's included).
    added: u64,
    added_bytes: u64,
    /// Live files: path -> (bytes, records).
    live: BTreeMap<String, (u64, u64)>,
}

impl DeltaLog {
    fn read(table: &Path) -> BenchResult<Self> {
        let mut commits: Vec<PathBuf> = std::fs::read_dir(table.join("_delta_log"))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                    n.len() == 25
                        && n.ends_with(".json")
                        && n[..20].bytes().all(|b| b.is_ascii_digit())
                })
            })
            .collect();
        commits.sort();
        let mut log = DeltaLog::default();
        for commit in commits {
            for line in std::fs::read_to_string(&commit)?.lines() {
                let action: serde_json::Value = serde_json::from_str(line)?;
                if let Some(info) = action.get("commitInfo") {
                    let op = info["operation"].as_str().unwrap_or("?").to_owned();
                    *log.commits.entry(op).or_default() += 1;
                } else if let Some(add) = action.get("add") {
                    let size = add["size"].as_u64().unwrap_or(0);
                    let records = add["stats"]
                        .as_str()
                        .and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok())
                        .and_then(|s| s["numRecords"].as_u64())
                        .unwrap_or(0);
                    log.added += 1;
                    log.added_bytes += size;
                    let path = add["path"].as_str().unwrap_or_default().to_owned();
                    log.live.insert(path, (size, records));
                } else if let Some(remove) = action.get("remove") {
                    log.live.remove(remove["path"].as_str().unwrap_or_default());
                }
            }
        }
        Ok(log)
    }

    fn records(&self) -> u64 {
        self.live.values().map(|(_, r)| r).sum()
    }

    fn live_bytes(&self) -> u64 {
        self.live.values().map(|(b, _)| b).sum()
    }
}

/// The sizes of the file sink's part files below `dir` (staging directories left out).
fn part_file_sizes(dir: &Path) -> BenchResult<Vec<u64>> {
    let mut files = Vec::new();
    walk(dir, &mut files)?;
    let mut sizes = Vec::new();
    for f in files {
        let hidden = f.strip_prefix(dir).ok().is_some_and(|r| {
            r.components()
                .any(|c| c.as_os_str().to_string_lossy().starts_with(['_', '.']))
        });
        let part = f
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("part-"));
        if part && !hidden {
            sizes.push(f.metadata()?.len());
        }
    }
    Ok(sizes)
}

/// The `p`-th percentile (nearest rank) of `v`.
fn percentile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

/// One run of `job` into `sink`, checked.
fn one_run(bench: &Bench, weir: &Path, job: Job, sink: Sink, s3: Option<&str>) -> BenchResult<Run> {
    let dir = tempfile::tempdir()?;
    let place = match s3 {
        None => Place::Local(dir.path().join("out")),
        Some(endpoint) => {
            let bucket = weir_testkit::s3::server()?.create_bucket("kbench-delta")?;
            Place::S3 {
                url: format!("s3://{bucket}/out"),
                endpoint: endpoint.to_owned(),
            }
        }
    };
    let input = Input {
        servers: &bench.servers,
        topic: &bench.input,
        bounded: true,
    };
    let sql = job_sql(&input, (job, sink), &place, "", &dir.path().join("cp"));
    let mut run = weir_run(weir, &sql, dir.path())?;
    let expected = match job {
        Job::Copy => bench.records,
        Job::Window => super::runtime::window_groups(bench.records),
    };
    let what = format!(
        "{} into {}",
        if job == Job::Copy { "copy" } else { "window" },
        sink.name()
    );
    if run.source_rows != bench.records || run.sink_rows != expected {
        return Err(format!(
            "{what}: read {} rows and wrote {}, expected {} and {expected}",
            run.source_rows, run.sink_rows, bench.records
        )
        .into());
    }
    if let Place::Local(out) = &place {
        match sink {
            Sink::Delta => {
                let log = DeltaLog::read(out)?;
                if log.records() != expected {
                    return Err(format!(
                        "{what}: the Delta table's live files hold {} records, expected {expected}",
                        log.records()
                    )
                    .into());
                }
                run.files = log.live.len();
                run.bytes = log.live_bytes();
            }
            Sink::Parquet => {
                let sizes = part_file_sizes(out)?;
                (run.files, run.bytes) = (sizes.len(), sizes.iter().sum());
            }
        }
    }
    Ok(run)
}

/// The figures of one job and sink over its runs.
fn report(label: &str, records: u64, runs: &[Run]) -> f64 {
    let rates: Vec<f64> = runs
        .iter()
        .map(|r| records as f64 / r.process_secs)
        .collect();
    let engine_rates: Vec<f64> = runs
        .iter()
        .map(|r| records as f64 / r.engine_secs)
        .collect();
    let list = |f: &dyn Fn(&Run) -> String| runs.iter().map(f).collect::<Vec<_>>().join(" ");
    let commits: Vec<f64> = runs.iter().flat_map(|r| r.commit_ms.clone()).collect();
    let rate = median(rates);
    println!(
        "{label:<28} {rate:>10.0} rec/s (engine {:>10.0}) | process s: {} | engine s: {} | cpu s: {} | \
         durable epochs: {} | commit ms p50 {:.0} p99 {:.0} max {:.0} (n={}) | files: {} | MB: {} | peak RSS {:.0} MB",
        median(engine_rates),
        list(&|r| format!("{:.2}", r.process_secs)),
        list(&|r| format!("{:.2}", r.engine_secs)),
        list(&|r| format!("{:.2}", r.cpu_secs)),
        list(&|r| r.checkpoints.to_string()),
        percentile(&commits, 50.0),
        percentile(&commits, 99.0),
        percentile(&commits, 100.0),
        commits.len(),
        list(&|r| r.files.to_string()),
        list(&|r| format!("{:.1}", r.bytes as f64 / 1e6)),
        runs.iter().map(|r| r.peak_rss_mb).fold(0.0, f64::max),
    );
    rate
}

/// Part 5a: the pairs, interleaved; 5b when asked for.
pub(crate) fn delta_against_parquet(bench: &Bench, weir: &Path) -> BenchResult<()> {
    let s3 = match std::env::var("WEIR_BENCH_KAFKA_S3").as_deref() {
        Ok("1") => Some(weir_testkit::s3::server()?.endpoint().to_owned()),
        _ => None,
    };
    let mut cases: Vec<(Job, Sink, Option<&str>)> = Vec::new();
    for job in [Job::Copy, Job::Window] {
        cases.push((job, Sink::Parquet, None));
        cases.push((job, Sink::Delta, None));
    }
    if let Some(endpoint) = &s3 {
        cases.push((Job::Copy, Sink::Parquet, Some(endpoint)));
        cases.push((Job::Copy, Sink::Delta, Some(endpoint)));
    }
    let mut runs: Vec<Vec<Run>> = cases.iter().map(|_| Vec::new()).collect();
    for round in 0..rounds() {
        // Pairs alternate which sink goes first.
        for pair in (0..cases.len()).step_by(2) {
            let order = if round % 2 == 0 {
                [pair, pair + 1]
            } else {
                [pair + 1, pair]
            };
            for i in order {
                let (job, sink, s3) = cases[i];
                runs[i].push(one_run(bench, weir, job, sink, s3)?);
            }
        }
    }
    println!();
    println!(
        "## 5a. Kafka -> Delta vs Kafka -> Parquet through `weir run` ({}), {} input records, \
         p=2, checkpoints every 1 s, {} interleaved rounds",
        weir.display(),
        bench.records,
        rounds()
    );
    for pair in (0..cases.len()).step_by(2) {
        let mut rates = [0.0; 2];
        for (k, i) in [pair, pair + 1].into_iter().enumerate() {
            let (job, sink, s3) = cases[i];
            let label = format!(
                "{} -> {}{}",
                if job == Job::Copy {
                    "copy"
                } else {
                    "window 10 s"
                },
                sink.name(),
                if s3.is_some() { " (S3)" } else { "" }
            );
            rates[k] = report(&label, bench.records, &runs[i]);
        }
        let paired: Vec<String> = runs[pair]
            .iter()
            .zip(&runs[pair + 1])
            .map(|(p, d)| format!("{:.2}", p.process_secs / d.process_secs))
            .collect();
        println!(
            "    Delta / Parquet (medians of process time): {:.2} (target >= 0.90); per round: {}",
            rates[1] / rates[0],
            paired.join(" ")
        );
    }
    Ok(())
}

/// Part 6 (5b in the docs): a steady stream into a Parquet table, a Delta table, a Delta table
/// with auto-compaction and a Parquet table with auto-compaction (to 4 MB files), each for
/// `WEIR_BENCH_KAFKA_DELTA_MINUTES` minutes (default 5).
pub(crate) fn small_files(bench: &Bench, weir: &Path) -> BenchResult<()> {
    let minutes: f64 = std::env::var("WEIR_BENCH_KAFKA_DELTA_MINUTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5.0);
    let rate: u64 = std::env::var("WEIR_BENCH_KAFKA_DELTA_RATE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5_000);
    // One case alone (its label, e.g. `Parquet, auto-compaction`), for a longer run of it.
    let only = std::env::var("WEIR_BENCH_KAFKA_DELTA_ONLY").ok();
    println!();
    println!(
        "## 5b. small files: copy at {rate} records/s for {minutes} min, p=2, checkpoints every \
         1 s, one job at a time (per hour: the run's figures scaled by 3600 / its seconds)"
    );
    for (label, sink, extra) in [
        ("Parquet", Sink::Parquet, ""),
        ("Delta", Sink::Delta, ""),
        (
            "Delta, auto-compaction",
            Sink::Delta,
            ", 'auto-compaction' = 'true'",
        ),
        // The file sink merges staged files until they reach the target: a small one, so that
        // a run of minutes publishes some.
        (
            "Parquet, auto-compaction",
            Sink::Parquet,
            ", 'auto-compaction' = 'true', 'compaction.file-size' = '4MB'",
        ),
    ] {
        if only.as_deref().is_some_and(|o| o != label) {
            continue;
        }
        let dir = tempfile::tempdir()?;
        let topic = unique_name("kbench-delta-steady");
        bench.broker.create_topic(&topic, PARTITIONS)?;
        let table = dir.path().join("out");
        let input = Input {
            servers: &bench.servers,
            topic: &topic,
            bounded: false,
        };
        let sql = job_sql(
            &input,
            (Job::Copy, sink),
            &Place::Local(table.clone()),
            extra,
            &dir.path().join("cp"),
        );
        let file = dir.path().join("job.sql");
        std::fs::write(&file, sql)?;
        let stop = Arc::new(AtomicBool::new(false));
        let producer = {
            let (servers, topic, stop) = (bench.servers.clone(), topic.clone(), stop.clone());
            std::thread::spawn(move || steady_producer(&servers, &topic, rate, &stop))
        };
        let mut child = Command::new(weir)
            .arg("run")
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let start = Instant::now();
        std::thread::sleep(Duration::from_secs_f64(minutes * 60.0));
        let elapsed = start.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        // The job's own process, by its PID (the `Child` handle).
        child.kill()?;
        child.wait()?;
        let produced = producer.join().map_err(|_| "the producer panicked")??;
        let commit_ms = commit_latencies(&dir.path().join("cp"))?;
        let scale = 3600.0 / elapsed;
        let (sizes, commits, added, added_bytes, records) = match sink {
            Sink::Delta => {
                let log = DeltaLog::read(&table)?;
                let sizes: Vec<f64> = log.live.values().map(|(b, _)| *b as f64).collect();
                let commits: Vec<String> = log
                    .commits
                    .iter()
                    .map(|(op, n)| format!("{op} {n}"))
                    .collect();
                (
                    sizes,
                    commits.join(", "),
                    log.added,
                    log.added_bytes,
                    log.records().to_string(),
                )
            }
            Sink::Parquet => {
                let sizes: Vec<f64> = part_file_sizes(&table)?.iter().map(|&b| b as f64).collect();
                let bytes = sizes.iter().sum::<f64>() as u64;
                let n = sizes.len() as u64;
                (sizes, "-".to_owned(), n, bytes, "-".to_owned())
            }
        };
        println!(
            "{label:<24} {elapsed:.0} s, {produced} records produced, {records} in live files | \
             commits: {commits} | files written {added} ({:.0}/h), {:.1} MB ({:.0} MB/h) | \
             live files at the end {}, {:.1} MB, sizes KB min {:.0} p50 {:.0} max {:.0} | \
             commit ms p50 {:.0} p99 {:.0} max {:.0} (n={})",
            added as f64 * scale,
            added_bytes as f64 / 1e6,
            added_bytes as f64 / 1e6 * scale,
            sizes.len(),
            sizes.iter().sum::<f64>() / 1e6,
            percentile(&sizes, 0.0) / 1e3,
            percentile(&sizes, 50.0) / 1e3,
            percentile(&sizes, 100.0) / 1e3,
            percentile(&commit_ms, 50.0),
            percentile(&commit_ms, 99.0),
            percentile(&commit_ms, 100.0),
            commit_ms.len(),
        );
    }
    Ok(())
}

/// Produces bids to `topic` at `rate` records/s (in 10 ms steps) until `stop`; returns how many.
fn steady_producer(servers: &str, topic: &str, rate: u64, stop: &AtomicBool) -> BenchResult<u64> {
    let producer = plain_producer(servers)?;
    let start = Instant::now();
    let mut sent = 0u64;
    let partitions = u64::try_from(PARTITIONS)?;
    while !stop.load(Ordering::Relaxed) {
        let due = (start.elapsed().as_secs_f64() * rate as f64) as u64;
        while sent < due {
            let value = bid_json(sent);
            let record = BaseRecord::to(topic)
                .payload(value.as_slice())
                .partition(i32::try_from(sent % partitions)?);
            send(&producer, record)?;
            sent += 1;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    flush(&producer)?;
    Ok(sent)
}
