//! The proof of recovery: `weir run` on a windowed SQL job with checkpoints (parallelism 2, over
//! files with 3% late rows, routed to a table of their own) is killed with SIGKILL at random
//! moments and at named fail points, restarted with `--restore latest` until its input is done,
//! and what it published, results and late rows, must equal, as multisets of rows, what a run
//! that never failed published: nothing lost, nothing twice. That run must equal what the test
//! computes reading the files in order.
//!
//! The input is always the same (a fixed seed); the kill schedule is seeded from the clock unless
//! `WEIR_CRASH_SEED` fixes it. `WEIR_CRASH_KILLS` (default 30) is how many kills a run of the test
//! makes at least; `scripts/crash-soak.sh` runs it with hundreds. [`joins`] is the same harness
//! over the same files for the joins, deduplication, OVER and Top-N operators; [`compaction`]
//! over the same job with the file sinks' auto-compaction.
#![cfg(unix)]

use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

mod common;
#[path = "crash/compaction.rs"]
mod compaction;
#[path = "crash/delta.rs"]
mod delta;
#[path = "crash/joins.rs"]
mod joins;
#[path = "crash/redis.rs"]
mod redis;

use common::{
    Diff, Evidence, Job, Kill, Outcome, Rounds, Schedule, Weir, XorShift, clock_seed, env_u64,
    files_named,
};

/// Input files, read in name order (which is time order) as one stream: a row is late exactly
/// when it is late reading the files one after another, whatever the parallelism or a restore.
const FILES: i64 = 8;
const ROWS_PER_FILE: i64 = 75_000;
/// File `f` holds event times in `[f * FILE_SPAN_MS, (f + 1) * FILE_SPAN_MS + JITTER_MS)`
/// after `BASE_MS`, but for its late rows.
const FILE_SPAN_MS: i64 = 20_000;
/// How far an on-time row's time may lag behind the newest one before it: well inside the
/// watermark's 1 s delay.
const JITTER_MS: i64 = 300;
/// Percent of the rows that are late: 2 to 10 s behind, routed to the late table.
const LATE_PERCENT: u64 = 3;
/// A whole second, so windows start on it.
const BASE_MS: i64 = 1_700_000_000_000;
const WINDOW_MS: i64 = 1_000;
/// The watermark is `ts - 1 s`, emitted when it advanced by the default 200 ms.
const DELAY_MS: i64 = 1_000;
const INTERVAL_MS: i64 = 200;
const AUCTIONS: i64 = 100;
const INPUT_SEED: u64 = 0x5eed_b1d5;

const DEFAULT_KILLS: u64 = 30;

/// One output row: auction, window start, window end (ms), count, sum, max.
type Row = [i64; 6];
/// One late row: auction, price, event time (ms).
type LateRow = [i64; 3];

#[test]
fn killed_and_restored_runs_publish_exactly_the_output_of_a_run_that_never_failed() {
    let kills_wanted = env_u64("WEIR_CRASH_KILLS").unwrap_or(DEFAULT_KILLS);
    let seed = env_u64("WEIR_CRASH_SEED").unwrap_or_else(clock_seed);
    println!("crash harness: seed {seed} (set WEIR_CRASH_SEED={seed} to repeat the schedule)");
    let evidence = Evidence::new();
    let work = evidence.path();
    let input = work.join("in");
    let (reference, late_reference) = write_input(&input);

    let golden_dir = work.join("golden");
    let started = Instant::now();
    let golden_job = file_job(&golden_dir, &input);
    let mut golden_run = Weir::spawn(&golden_job, false, None);
    match golden_run.drive(&Kill::Never) {
        Outcome::Finished => {}
        other => panic!(
            "the run without kills did not finish: {other}\n{}",
            golden_run.stderr()
        ),
    }
    let golden = published_rows(&output_of(&golden_job));
    // Without a durable checkpoint every restore would start over, and the rounds prove nothing.
    let manifests = files_named(&golden_job.checkpoints, "manifest.json");
    println!(
        "crash harness: golden run took {:.1} s, {} rows, {manifests} checkpoint manifests kept",
        started.elapsed().as_secs_f64(),
        golden.len()
    );
    assert!(
        manifests > 0,
        "the run without kills left no checkpoint manifest in {}\n{}",
        golden_job.checkpoints.display(),
        golden_run.stderr()
    );
    assert_eq!(
        dropped_late(&golden_job),
        0,
        "the run without kills dropped rows: its late rows are routed"
    );
    if let Some(diff) = row_diff(&reference, &golden) {
        panic!("the run without kills differs from the rows computed by the test:\n{diff}");
    }
    let golden_late = late_rows(&golden_job);
    if let Some(diff) = late_diff(&late_reference, &golden_late) {
        panic!("the run without kills routed other late rows than the test computed:\n{diff}");
    }

    let mut rounds = Rounds::new(seed, kills_wanted, Schedule::new(seed));
    while rounds.tally.kills() < kills_wanted {
        let round = rounds.done + 1;
        let job = file_job(&work.join(format!("round-{round}")), &input);
        rounds.run(&job, &|job| {
            format!(
                ", {}, {} rows dropped as late",
                job.restored_from(),
                dropped_late(job)
            )
        });
        let dropped = dropped_late(&job);
        let published = published_rows(&output_of(&job));
        if let Some(diff) = row_diff(&golden, &published) {
            panic!(
                "round {round} (seed {seed}) published other rows than the run without kills:\n\
                 {diff}\nkill sequence:\n{}",
                rounds.log.join("\n")
            );
        }
        // A row read again after its window fired (input the restored checkpoint had already
        // consumed) would be routed twice.
        if let Some(diff) = late_diff(&golden_late, &late_rows(&job)) {
            panic!(
                "round {round} (seed {seed}) routed other late rows than the run without kills \
                 (a repeated one was read again after a restore):\n{diff}\nkill sequence:\n{}",
                rounds.log.join("\n")
            );
        }
        assert!(
            dropped == 0,
            "round {round} (seed {seed}): the run that ended dropped {dropped} rows, but late \
             rows are routed\nkill sequence:\n{}",
            rounds.log.join("\n")
        );
        println!(
            "crash harness: round {round} matches the golden output ({} kills so far)",
            rounds.tally.kills()
        );
        std::fs::remove_dir_all(&job.dir).expect("remove the round's directory");
    }
    rounds.assert_every_fail_point_reached(DEFAULT_KILLS);
    let Rounds { tally, done, .. } = rounds;

    println!("crash harness: fail points reached {:?}", tally.reached);
    println!(
        "crash harness: {} kills ({} at fail points, {} at random moments), {done} rounds, \
         {} output rows checked per round ({} in all)",
        tally.kills(),
        tally.at_fail_points,
        tally.at_random,
        golden.len(),
        golden.len() * done as usize
    );
}

/// The job of a round (or of the run without kills) in `dir`: a windowed count from the bids
/// in `input` into Parquet files in `dir/out`.
fn file_job(dir: &Path, input: &Path) -> Job {
    let output = output_of_dir(dir);
    let sql = format!(
        "SET 'parallelism' = '2';\n\
         SET 'checkpoint.interval' = '150ms';\n\
         SET 'late.policy' = 'route';\n\
         SET 'late.sink' = 'late_bids';\n\
         CREATE TABLE bids (\n\
         \x20 auction BIGINT NOT NULL,\n\
         \x20 price BIGINT NOT NULL,\n\
         \x20 date_time BIGINT NOT NULL,\n\
         \x20 ts AS TO_TIMESTAMP_MILLIS(date_time),\n\
         \x20 WATERMARK FOR ts AS ts - INTERVAL '1' SECOND\n\
         ) WITH ('connector' = 'filesystem', 'path' = '{}/bids-*.csv', 'format' = 'csv');\n\
         CREATE TABLE per_auction (\n\
         \x20 auction BIGINT, window_start TIMESTAMP(3), window_end TIMESTAMP(3),\n\
         \x20 bids BIGINT, total BIGINT, top BIGINT\n\
         ) WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'parquet');\n\
         CREATE TABLE late_bids (auction BIGINT, price BIGINT, ts TIMESTAMP(3))\n\
         \x20 WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'parquet');\n\
         INSERT INTO per_auction\n\
         SELECT auction, window_start, window_end, COUNT(*), SUM(price), MAX(price)\n\
         FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '1' SECOND))\n\
         GROUP BY auction, window_start, window_end;\n",
        input.display(),
        output.display(),
        late_of_dir(dir).display()
    );
    Job::create(dir, &sql)
}

/// Where a job's sink writes.
fn output_of(job: &Job) -> PathBuf {
    output_of_dir(&job.dir)
}

fn output_of_dir(dir: &Path) -> PathBuf {
    dir.join("out")
}

/// Where a job's late rows go.
fn late_of_dir(dir: &Path) -> PathBuf {
    dir.join("late")
}

/// The late rows a job published, sorted.
fn late_rows(job: &Job) -> Vec<LateRow> {
    common::published_parquet_rows(&late_of_dir(&job.dir))
}

/// How two sorted lists of late rows differ.
fn late_diff(expected: &[LateRow], actual: &[LateRow]) -> Option<Diff<LateRow>> {
    Diff::of(expected, actual, "[auction, price, event time ms]")
}

/// How many rows the last run's operators dropped. Late rows are routed, so any is a bug.
fn dropped_late(job: &Job) -> u64 {
    let summary = job.summary().unwrap_or_default();
    let operators = summary["operators"].as_array().cloned().unwrap_or_default();
    operators.iter().filter_map(|o| o["dropped"].as_u64()).sum()
}

/// Writes the bids and returns the job's output and late rows computed here, sorted: reading
/// the files in name order from the first row to the last, a row is late when its window ended
/// at or before the watermark emitted before it.
fn write_input(dir: &Path) -> (Vec<Row>, Vec<LateRow>) {
    std::fs::create_dir_all(dir).expect("create the input directory");
    let mut rng = XorShift::new(INPUT_SEED);
    let mut windows: HashMap<(i64, i64), (i64, i64, i64)> = HashMap::new();
    let mut late = Vec::new();
    let mut max: Option<i64> = None;
    let mut emitted: Option<i64> = None;
    for file in 0..FILES {
        let path = dir.join(format!("bids-{file:02}.csv"));
        let mut out = BufWriter::new(File::create(&path).expect("create an input file"));
        writeln!(out, "auction,price,date_time").expect("write");
        for i in 0..ROWS_PER_FILE {
            let auction = 1_000 + rng.below(AUCTIONS as u64) as i64;
            let price = 1 + rng.below(5_000) as i64;
            let mut ts = BASE_MS
                + file * FILE_SPAN_MS
                + i * FILE_SPAN_MS / ROWS_PER_FILE
                + rng.below(JITTER_MS as u64) as i64;
            if rng.below(100) < LATE_PERCENT {
                ts -= 2_000 + rng.below(8_000) as i64;
            }
            writeln!(out, "{auction},{price},{ts}").expect("write");
            let start = ts - ts.rem_euclid(WINDOW_MS);
            if emitted.is_some_and(|w| start + WINDOW_MS - 1 <= w) {
                late.push([auction, price, ts]);
            } else {
                let w = windows.entry((auction, start)).or_insert((0, 0, i64::MIN));
                w.0 += 1;
                w.1 += price;
                w.2 = w.2.max(price);
            }
            if max.is_none_or(|m| ts > m) {
                max = Some(ts);
                if emitted.is_none_or(|w| ts - DELAY_MS >= w + INTERVAL_MS) {
                    emitted = Some(ts - DELAY_MS);
                }
            }
        }
        out.flush().expect("flush");
    }
    let mut rows: Vec<Row> = windows
        .into_iter()
        .map(|((auction, start), (n, sum, max))| [auction, start, start + WINDOW_MS, n, sum, max])
        .collect();
    rows.sort_unstable();
    late.sort_unstable();
    assert!(
        late.len() > (FILES * ROWS_PER_FILE) as usize / 100,
        "the input has late rows: {}",
        late.len()
    );
    (rows, late)
}

/// Every row of the committed `part-*.parquet` files directly in `dir` (not `_staging/`), sorted.
fn published_rows(dir: &Path) -> Vec<Row> {
    common::published_parquet_rows(dir)
}

/// How two sorted outputs differ, with the windows where they do.
fn row_diff(expected: &[Row], actual: &[Row]) -> Option<Diff<Row>> {
    let mut diff = Diff::of(
        expected,
        actual,
        "[auction, window_start ms, window_end ms, count, sum, max]",
    )?;
    let windows: BTreeSet<i64> = (diff.missing.iter())
        .chain(&diff.extra)
        .map(|(row, _)| row[1])
        .collect();
    if let (Some(first), Some(last)) = (windows.first(), windows.last()) {
        diff.note = format!(
            "{} windows differ, starting from {first} to {last} ms ({} to {} s after the first \
             input time)\n",
            windows.len(),
            (first - BASE_MS) / 1_000,
            (last - BASE_MS) / 1_000
        );
    }
    Some(diff)
}
