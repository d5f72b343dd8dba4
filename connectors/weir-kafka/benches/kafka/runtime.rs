//! Part 4 of the Kafka bench: the same input through the whole engine, as a user runs it.
//!
//! `WEIR_BENCH_KAFKA_WEIR` names a `weir` binary (a release build of `weir-cli`); each job is a
//! SQL file run by `weir run --json` in its own process against the bench's broker, with
//! checkpoints every second in a fresh local directory. Timed: the whole process, from spawn
//! to exit (SQL planning, connecting, initializing transactions, reading, the last commit),
//! and the engine's own `wall_time_secs` from the summary.
//!
//! - (a) the bare rdkafka loop of part 2, interleaved with
//! - (b) `INSERT INTO out SELECT * FROM bids WHERE price >= 500`, Kafka to Kafka exactly once,
//!   at parallelism 1 and 2;
//! - (c) a 10-second tumbling window counting bids per auction, Kafka to Parquet (the file
//!   sink, exactly once) at parallelism 2.
//!
//! Every run's summary must show the rows expected (all input read; for (b) the passing rows,
//! for (c) one row per auction and window); the first run of (b) is also counted in the output
//! topic with a read_committed consumer, outside the timing.

use std::collections::HashSet;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use weir_testkit::unique_name;

use super::{Bench, BenchResult, PARTITIONS, PRICE_CUT, RUNS, bare_filter, median, mix, verify};

/// Width of the tumbling window of (c), in milliseconds of event time.
const WINDOW_MS: u64 = 10_000;

/// What one `weir run` reported.
struct Run {
    /// Spawn to exit.
    process_secs: f64,
    /// The engine's own clock (`wall_time_secs` in the summary).
    engine_secs: f64,
    source_rows: u64,
    sink_rows: u64,
    peak_rss_mb: f64,
    /// Epochs made durable.
    checkpoints: u64,
}

/// The `CREATE TABLE` of the bench's input topic, read from its beginning to the offsets
/// that were latest at the start.
fn bids_table(bench: &Bench, watermark: bool) -> String {
    let time = if watermark {
        ",\n  et AS TO_TIMESTAMP_MILLIS(ts),\n  WATERMARK FOR et AS et - INTERVAL '1' SECOND"
    } else {
        ""
    };
    format!(
        "CREATE TABLE bids (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, \
         url STRING, ts BIGINT{time}\n) WITH ('connector' = 'kafka', 'topic' = '{}',\n  \
         'properties.bootstrap.servers' = '{}', 'format' = 'json',\n  \
         'scan.startup.mode' = 'earliest-offset', 'scan.bounded.mode' = 'latest-offset');\n",
        bench.input, bench.servers
    )
}

/// The settings every job of this part shares.
fn job_settings(name: &str, parallelism: usize, checkpoints: &Path) -> String {
    format!(
        "SET 'job.name' = '{name}';\nSET 'parallelism' = '{parallelism}';\n\
         SET 'checkpoint.interval' = '1s';\nSET 'checkpoint.dir' = '{}';\n",
        checkpoints.display()
    )
}

/// (b): Kafka -> filter -> Kafka, exactly once.
fn filter_sql(bench: &Bench, parallelism: usize, output: &str, dir: &Path) -> String {
    format!(
        "{}{}CREATE TABLE out (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, \
         url STRING, ts BIGINT) WITH (\n  'connector' = 'kafka', 'topic' = '{output}',\n  \
         'properties.bootstrap.servers' = '{}', 'format' = 'json',\n  \
         'sink.delivery-guarantee' = 'exactly-once',\n  \
         'sink.transactional-id-prefix' = '{}');\n\
         INSERT INTO out SELECT * FROM bids WHERE price >= {PRICE_CUT};\n",
        job_settings(&unique_name("kbench-filter"), parallelism, &dir.join("cp")),
        bids_table(bench, false),
        bench.servers,
        unique_name("kbench-run"),
    )
}

/// (c): Kafka -> tumbling window -> Parquet, exactly once.
fn window_sql(bench: &Bench, parallelism: usize, dir: &Path) -> String {
    format!(
        "{}{}CREATE TABLE out (auction BIGINT, window_start TIMESTAMP(3), bids BIGINT, \
         max_price BIGINT) WITH (\n  'connector' = 'filesystem', 'path' = '{}', \
         'format' = 'parquet');\n\
         INSERT INTO out SELECT auction, window_start, COUNT(*), MAX(price)\n\
         FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(et), INTERVAL '{}' SECOND))\n\
         GROUP BY auction, window_start, window_end;\n",
        job_settings(&unique_name("kbench-window"), parallelism, &dir.join("cp")),
        bids_table(bench, true),
        dir.join("out").display(),
        WINDOW_MS / 1000,
    )
}

/// The rows (c) writes: one per auction and window that holds a bid.
pub(crate) fn window_groups(records: u64) -> u64 {
    // As `bid_json`: auction `1000 + r % 10_000`, event time `base + i` milliseconds.
    let base = 1_733_100_000_000u64;
    let groups: HashSet<(u64, u64)> = (0..records)
        .map(|i| (1000 + mix(i) % 10_000, (base + i) / WINDOW_MS))
        .collect();
    groups.len() as u64
}

/// Runs the SQL job `sql` with `weir run --json` and reads its summary.
fn weir_run(weir: &Path, sql: &str, dir: &Path) -> BenchResult<Run> {
    let file = dir.join("job.sql");
    std::fs::write(&file, sql)?;
    let start = Instant::now();
    let output = Command::new(weir)
        .arg("run")
        .arg("--json")
        .arg(&file)
        .output()?;
    let process_secs = start.elapsed().as_secs_f64();
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
        engine_secs: number("wall_time_secs")?,
        source_rows: number("source_rows")? as u64,
        sink_rows: number("sink_rows")? as u64,
        peak_rss_mb: summary["peak_rss_bytes"].as_f64().unwrap_or(0.0) / 1e6,
        checkpoints: summary["checkpoints"]["completed"].as_u64().unwrap_or(0),
    })
}

/// Fails unless `run` read every input record and wrote `sink_rows` rows.
fn check(bench: &Bench, run: &Run, sink_rows: u64, what: &str) -> BenchResult<()> {
    if run.source_rows != bench.records || run.sink_rows != sink_rows {
        return Err(format!(
            "{what}: read {} rows and wrote {}, expected {} and {sink_rows}",
            run.source_rows, run.sink_rows, bench.records
        )
        .into());
    }
    Ok(())
}

/// Input records per second of each run, and the runs' figures as one table row.
fn row(label: &str, records: u64, runs: &[Run]) -> (f64, String) {
    let rates: Vec<f64> = runs
        .iter()
        .map(|r| records as f64 / r.process_secs)
        .collect();
    let secs = |f: fn(&Run) -> f64| {
        runs.iter()
            .map(|r| format!("{:.2}", f(r)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let rss = runs.iter().map(|r| r.peak_rss_mb).fold(0.0, f64::max);
    let checkpoints = runs.iter().map(|r| r.checkpoints).max().unwrap_or(0);
    let median_rate = median(rates);
    (
        median_rate,
        format!(
            "{label:<46} {median_rate:>12.0} | process s: {} | engine s: {} | peak RSS {rss:.0} MB | durable epochs (most) {checkpoints}",
            secs(|r| r.process_secs),
            secs(|r| r.engine_secs),
        ),
    )
}

/// Part 4: [`RUNS`] interleaved runs of (a), (b) at parallelism 1 and 2, and (c).
pub(crate) fn through_weir_run(bench: &Bench, weir: &Path) -> BenchResult<()> {
    let (records, passing) = (bench.records, bench.passing);
    let groups = window_groups(records);
    let mut bare = Vec::new();
    let mut filter = [Vec::new(), Vec::new()];
    let mut window = Vec::new();
    for run in 0..RUNS {
        let output = unique_name("kbench-bare-out");
        bench.broker.create_topic(&output, PARTITIONS)?;
        bare.push(records as f64 / bare_filter(bench, &output)?.as_secs_f64());

        for (i, parallelism) in [1, 2].into_iter().enumerate() {
            let dir = tempfile::tempdir()?;
            let output = unique_name("kbench-run-out");
            bench.broker.create_topic(&output, PARTITIONS)?;
            let sql = filter_sql(bench, parallelism, &output, dir.path());
            let done = weir_run(weir, &sql, dir.path())?;
            let what = format!("filter job, parallelism {parallelism}");
            check(bench, &done, passing, &what)?;
            if run == 0 {
                verify(bench, &output, &what)?;
            }
            filter[i].push(done);
        }

        let dir = tempfile::tempdir()?;
        let done = weir_run(weir, &window_sql(bench, 2, dir.path()), dir.path())?;
        check(bench, &done, groups, "window job")?;
        window.push(done);
    }
    println!();
    println!(
        "## 4. through `weir run` ({}), {records} input records, {RUNS} runs, checkpoints every 1 s",
        weir.display()
    );
    println!(
        "{:<46} {:>12}",
        "job", "median rec/s (input over process time)"
    );
    let bare_rate = median(bare.clone());
    println!(
        "{:<46} {bare_rate:>12.0} | runs: {}",
        "(a) bare rdkafka loop, plain producer",
        bare.iter()
            .map(|r| format!("{r:.0}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    for (i, runs) in filter.iter().enumerate() {
        let label = format!("(b) filter -> Kafka exactly-once, p={}", i + 1);
        let (rate, line) = row(&label, records, runs);
        println!("{line}");
        println!(
            "    ratio (b, p={})/(a): {:.2} (target >= 0.70)",
            i + 1,
            rate / bare_rate
        );
    }
    let (_, line) = row(
        "(c) tumble 10 s -> Parquet exactly-once, p=2",
        records,
        &window,
    );
    println!("{line}");
    println!("    (c) wrote {groups} rows (auction x window) per run");
    Ok(())
}
