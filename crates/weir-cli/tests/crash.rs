//! The proof of recovery: `weir run` on a windowed SQL job with checkpoints is killed with
//! SIGKILL at random moments and at named fail points, restarted with `--restore latest` until
//! its input is done, and what it published must equal, as a multiset of rows, what a run that
//! never failed published: nothing lost, nothing twice.
//!
//! The input is always the same (a fixed seed); the kill schedule is seeded from the clock unless
//! `WEIR_CRASH_SEED` fixes it. `WEIR_CRASH_KILLS` (default 30) is how many kills a run of the test
//! makes at least; `scripts/crash-soak.sh` runs it with hundreds.
#![cfg(unix)]

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arrow::array::{Array, Int64Array};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// Input files. A source subtask reads its splits in name order, which is time order, so no
/// row is late however the splits are spread over the subtasks (`i mod p` on a fresh start).
const FILES: i64 = 8;
const ROWS_PER_FILE: i64 = 75_000;
/// File `f` holds event times in `[f * FILE_SPAN_MS, (f + 1) * FILE_SPAN_MS + JITTER_MS)`
/// after `BASE_MS`: every subtask reads its files in increasing time.
const FILE_SPAN_MS: i64 = 20_000;
/// How far a row's time may lag behind the newest one before it: well inside the watermark's
/// 1 s delay, so no row is ever late and the output does not depend on where a cut falls.
const JITTER_MS: i64 = 300;
/// A whole second, so windows start on it.
const BASE_MS: i64 = 1_700_000_000_000;
const WINDOW_MS: i64 = 1_000;
const AUCTIONS: i64 = 100;
const INPUT_SEED: u64 = 0x5eed_b1d5;

/// The fail points the runtime offers (`WEIR_FAILPOINT=<name>@<n>`).
const FAIL_POINTS: [&str; 5] = [
    "after-pre-commit",
    "after-segments",
    "after-manifest",
    "mid-commit",
    "mid-restore",
];
/// Only reachable by a run that restores.
const RESTORE_FAIL_POINT: &str = "mid-restore";
/// Random kills land this long after the spawn: long enough for a restarted job to get past
/// restore and a checkpoint or two, so rounds end.
const MIN_DELAY_MS: u64 = 150;
const MAX_DELAY_MS: u64 = 1_500;
/// A run that neither ends nor reaches its fail point in this time is killed anyway.
const RUN_TIMEOUT: Duration = Duration::from_secs(90);
/// A round that needs more restarts than this is not making progress.
const MAX_ATTEMPTS_PER_ROUND: u32 = 150;
const DEFAULT_KILLS: u64 = 30;
/// The signal `Child::kill` sends; its number is the same on every Unix.
const SIGKILL: i32 = 9;

/// One output row: auction, window start, window end (ms), count, sum, max.
type Row = [i64; 6];

#[test]
fn killed_and_restored_runs_publish_exactly_the_output_of_a_run_that_never_failed() {
    let kills_wanted = env_u64("WEIR_CRASH_KILLS").unwrap_or(DEFAULT_KILLS);
    let seed = env_u64("WEIR_CRASH_SEED").unwrap_or_else(clock_seed);
    println!("crash harness: seed {seed} (set WEIR_CRASH_SEED={seed} to repeat the schedule)");
    let evidence = Evidence(Some(tempfile::tempdir().expect("tempdir")));
    let work = evidence.path();
    let input = work.join("in");
    let reference = write_input(&input);

    let golden_dir = work.join("golden");
    let started = Instant::now();
    let golden_job = Job::create(&golden_dir, &input);
    let mut golden_run = Weir::spawn(&golden_job, false, None);
    match golden_run.drive(&Kill::Never) {
        Outcome::Finished => {}
        other => panic!(
            "the run without kills did not finish: {other}\n{}",
            golden_run.stderr()
        ),
    }
    let golden = published_rows(&golden_job.output);
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
        "the run without kills dropped late rows: the input is not what the test assumes"
    );
    if let Some(diff) = Diff::of(&reference, &golden) {
        panic!("the run without kills differs from the rows computed by the test:\n{diff}");
    }

    let mut rounds = Rounds {
        seed,
        kills_wanted,
        schedule: Schedule::new(seed),
        tally: Tally::default(),
        log: Vec::new(),
        done: 0,
    };
    while rounds.tally.kills() < kills_wanted {
        let round = rounds.done + 1;
        let job = Job::create(&work.join(format!("round-{round}")), &input);
        let dropped = rounds.run(&job);
        // The input has no late row: a row dropped as late was read again after its window
        // fired, input that the restored checkpoint had already consumed.
        let replayed = format!(
            "the run that ended dropped {dropped} rows as late, but the input has none: it read \
             input again that the checkpoint it restored had already consumed"
        );
        let published = published_rows(&job.output);
        if let Some(diff) = Diff::of(&golden, &published) {
            panic!(
                "round {round} (seed {seed}) published other rows than the run without kills:\n\
                 {diff}{}\nkill sequence:\n{}",
                if dropped > 0 { &replayed } else { "" },
                rounds.log.join("\n")
            );
        }
        assert!(
            dropped == 0,
            "round {round} (seed {seed}): {replayed}\nkill sequence:\n{}",
            rounds.log.join("\n")
        );
        println!(
            "crash harness: round {round} matches the golden output ({} kills so far)",
            rounds.tally.kills()
        );
        std::fs::remove_dir_all(&job.dir).expect("remove the round's directory");
    }
    let Rounds {
        tally, log, done, ..
    } = rounds;

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
    if kills_wanted >= DEFAULT_KILLS {
        let missed: Vec<_> = FAIL_POINTS
            .iter()
            .filter(|name| !tally.reached.contains_key(**name))
            .collect();
        assert!(
            missed.is_empty(),
            "fail points never reached in {} kills (seed {seed}): {missed:?}\n{}",
            tally.kills(),
            log.join("\n")
        );
    }
}

/// The crash rounds: each a fresh job killed and restored until it ends by itself.
struct Rounds {
    seed: u64,
    kills_wanted: u64,
    schedule: Schedule,
    tally: Tally,
    /// Every attempt of every round, for failure messages.
    log: Vec<String>,
    /// Rounds that ended.
    done: u32,
}

impl Rounds {
    /// Spawns the job, kills it as the schedule says and restarts it with `--restore latest`
    /// until a run ends by itself. Once enough kills are done, the restarted run is left to end.
    /// Returns how many rows the run that ended dropped as late.
    fn run(&mut self, job: &Job) -> u64 {
        let round = self.done + 1;
        let seed = self.seed;
        for attempt in 0..MAX_ATTEMPTS_PER_ROUND {
            let restore = attempt > 0;
            let kill = if self.tally.kills() >= self.kills_wanted {
                Kill::Never
            } else {
                // Only a run with a published manifest to restore reaches `mid-restore`.
                let restores = restore && files_named(&job.checkpoints, "manifest.json") > 0;
                self.schedule.next(restores, &self.tally)
            };
            if restore {
                let kept = job.dir.join(format!("checkpoints-before-{attempt}"));
                copy_dir(&job.checkpoints, &kept);
            }
            let started = Instant::now();
            let mut weir = Weir::spawn(job, restore, kill.fail_point_env());
            let outcome = weir.drive(&kill);
            let mut line = format!(
                "round {round} attempt {attempt}: {kill} -> {outcome} after {} ms",
                started.elapsed().as_millis()
            );
            let dropped = match outcome {
                Outcome::Finished => dropped_late(job),
                _ => 0,
            };
            if matches!(outcome, Outcome::Finished) {
                line.push_str(&format!(
                    ", {}, {dropped} rows dropped as late",
                    job.restored_from()
                ));
            }
            // Shown with --nocapture, and by the test harness when the test fails.
            println!("{line}");
            let mut attempts = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(job.dir.join("attempts.log"))
                .expect("open the round's attempt log");
            writeln!(attempts, "{line}").expect("log the attempt");
            self.log.push(line);
            let stderr = job.dir.join(format!("stderr-{attempt}.log"));
            std::fs::write(stderr, weir.stderr()).expect("keep the run's stderr");
            match outcome {
                Outcome::Finished => {
                    self.done = round;
                    return dropped;
                }
                Outcome::KilledAtFailPoint(name) => {
                    self.tally.at_fail_points += 1;
                    *self.tally.reached.entry(name).or_default() += 1;
                }
                Outcome::Killed => self.tally.at_random += 1,
                Outcome::Failed(status) => panic!(
                    "round {round} attempt {attempt} (seed {seed}): weir failed with {status}\n\
                     stderr:\n{}\nkill sequence:\n{}",
                    weir.stderr(),
                    self.log.join("\n")
                ),
            }
        }
        panic!(
            "round {round} (seed {seed}): no run ended by itself in {MAX_ATTEMPTS_PER_ROUND} \
             attempts\n{}",
            self.log.join("\n")
        );
    }
}

/// The test's directory, removed when the test passes and kept when it fails: a failed round's
/// directory holds its checkpoints (as each restarted run found them, in
/// `checkpoints-before-<attempt>`), its committed and staged output, `attempts.log` and every
/// run's stderr.
struct Evidence(Option<tempfile::TempDir>);

impl Evidence {
    fn path(&self) -> &Path {
        self.0
            .as_ref()
            .expect("the directory is kept only on drop")
            .path()
    }
}

impl Drop for Evidence {
    fn drop(&mut self) {
        if std::thread::panicking()
            && let Some(dir) = self.0.take()
        {
            eprintln!(
                "crash harness: kept the failed test's files in {}",
                dir.keep().display()
            );
        }
    }
}

/// How many kills of which kind, and how often each fail point was reached.
#[derive(Default)]
struct Tally {
    at_fail_points: u64,
    at_random: u64,
    reached: BTreeMap<&'static str, u64>,
}

impl Tally {
    fn kills(&self) -> u64 {
        self.at_fail_points + self.at_random
    }
}

/// When to kill a run.
#[derive(Debug, Clone)]
enum Kill {
    /// Once the process reports reaching fail point `name` for the `nth` time.
    At { name: &'static str, nth: u64 },
    /// This long after the spawn, wherever the process is.
    After(Duration),
    /// Not at all: the run must end by itself.
    Never,
}

impl Kill {
    fn fail_point_env(&self) -> Option<String> {
        match self {
            Kill::At { name, nth } => Some(format!("{name}@{nth}")),
            Kill::After(_) | Kill::Never => None,
        }
    }
}

impl fmt::Display for Kill {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Kill::At { name, nth } => write!(f, "fail point {name}@{nth}"),
            Kill::After(d) => write!(f, "kill after {} ms", d.as_millis()),
            Kill::Never => write!(f, "no kill"),
        }
    }
}

/// How a run ended.
#[derive(Debug)]
enum Outcome {
    /// Exit status 0: the input is done.
    Finished,
    /// SIGKILLed after reporting this fail point.
    KilledAtFailPoint(&'static str),
    /// SIGKILLed at a random moment (or when its fail point took too long).
    Killed,
    /// Any other exit: a bug.
    Failed(ExitStatus),
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Finished => write!(f, "finished"),
            Outcome::KilledAtFailPoint(name) => write!(f, "killed at {name}"),
            Outcome::Killed => write!(f, "killed"),
            Outcome::Failed(status) => write!(f, "failed: {status}"),
        }
    }
}

/// The kill schedule: a coin between a fail point (the five in turn) and a random delay.
struct Schedule {
    rng: XorShift,
    next_fail_point: usize,
}

impl Schedule {
    fn new(seed: u64) -> Self {
        Schedule {
            rng: XorShift::new(seed),
            next_fail_point: 0,
        }
    }

    /// The kill for the next run; `restores`: whether that run restores a checkpoint. A fail
    /// point not reached yet is asked for at its first occurrence, so each is seen early.
    fn next(&mut self, restores: bool, tally: &Tally) -> Kill {
        let name = FAIL_POINTS[self.next_fail_point];
        if self.rng.below(2) == 0 && (restores || name != RESTORE_FAIL_POINT) {
            self.next_fail_point = (self.next_fail_point + 1) % FAIL_POINTS.len();
            let nth = if tally.reached.contains_key(name) {
                1 + self.rng.below(3)
            } else {
                1
            };
            Kill::At { name, nth }
        } else {
            let ms = MIN_DELAY_MS + self.rng.below(MAX_DELAY_MS - MIN_DELAY_MS + 1);
            Kill::After(Duration::from_millis(ms))
        }
    }
}

/// Marsaglia's xorshift64*: enough randomness for a kill schedule, and no dependency.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        // Zero is the one state xorshift never leaves.
        XorShift((seed ^ 0x9e37_79b9_7f4a_7c15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform enough in `0..n` for n far below 2^64.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A job's directory: the SQL script, the checkpoint directory, the sink's output and the last
/// run's JSON summary.
struct Job {
    dir: PathBuf,
    script: PathBuf,
    checkpoints: PathBuf,
    output: PathBuf,
    summary: PathBuf,
}

impl Job {
    fn create(dir: &Path, input: &Path) -> Self {
        let checkpoints = dir.join("checkpoints");
        std::fs::create_dir_all(&checkpoints).expect("create the checkpoint directory");
        let output = dir.join("out");
        let script = dir.join("job.sql");
        let sql = format!(
            "SET 'parallelism' = '2';\n\
             SET 'checkpoint.interval' = '150ms';\n\
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
             INSERT INTO per_auction\n\
             SELECT auction, window_start, window_end, COUNT(*), SUM(price), MAX(price)\n\
             FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '1' SECOND))\n\
             GROUP BY auction, window_start, window_end;\n",
            input.display(),
            output.display()
        );
        std::fs::write(&script, sql).expect("write the job");
        Job {
            dir: dir.to_path_buf(),
            script,
            checkpoints,
            output,
            summary: dir.join("summary.json"),
        }
    }

    /// The last run's JSON summary, if it wrote one.
    fn summary(&self) -> Option<serde_json::Value> {
        let bytes = std::fs::read(&self.summary).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// What the last run's summary says it restored from; informative only, so a summary
    /// without the field is not an error.
    fn restored_from(&self) -> String {
        match self
            .summary()
            .as_ref()
            .map(|s| &s["checkpoints"]["restoredFrom"])
        {
            Some(serde_json::Value::Number(epoch)) => format!("restored from epoch {epoch}"),
            Some(serde_json::Value::Null) => "started fresh".to_owned(),
            _ => "no summary".to_owned(),
        }
    }
}

/// How many rows the last run's operators dropped as late. The input has no late row, so any
/// is a row read again after its window fired: input that a restore should have skipped.
fn dropped_late(job: &Job) -> u64 {
    let summary = job.summary().unwrap_or_default();
    let operators = summary["operators"].as_array().cloned().unwrap_or_default();
    operators.iter().filter_map(|o| o["dropped"].as_u64()).sum()
}

/// Copies a directory tree, to keep the checkpoints a run started from.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create a directory");
    // A checkpoint directory changes only while a run is alive, and none is now.
    for entry in std::fs::read_dir(from).expect("read a directory") {
        let entry = entry.expect("directory entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy a file");
        }
    }
}

/// Writes the bids and returns the job's output computed here, sorted.
fn write_input(dir: &Path) -> Vec<Row> {
    std::fs::create_dir_all(dir).expect("create the input directory");
    let mut rng = XorShift::new(INPUT_SEED);
    let mut windows: HashMap<(i64, i64), (i64, i64, i64)> = HashMap::new();
    for file in 0..FILES {
        let path = dir.join(format!("bids-{file:02}.csv"));
        let mut out = BufWriter::new(File::create(&path).expect("create an input file"));
        writeln!(out, "auction,price,date_time").expect("write");
        for i in 0..ROWS_PER_FILE {
            let auction = 1_000 + rng.below(AUCTIONS as u64) as i64;
            let price = 1 + rng.below(5_000) as i64;
            let ts = BASE_MS
                + file * FILE_SPAN_MS
                + i * FILE_SPAN_MS / ROWS_PER_FILE
                + rng.below(JITTER_MS as u64) as i64;
            writeln!(out, "{auction},{price},{ts}").expect("write");
            let start = ts - ts.rem_euclid(WINDOW_MS);
            let w = windows.entry((auction, start)).or_insert((0, 0, i64::MIN));
            w.0 += 1;
            w.1 += price;
            w.2 = w.2.max(price);
        }
        out.flush().expect("flush");
    }
    let mut rows: Vec<Row> = windows
        .into_iter()
        .map(|((auction, start), (n, sum, max))| [auction, start, start + WINDOW_MS, n, sum, max])
        .collect();
    rows.sort_unstable();
    rows
}

/// Every row of the committed `part-*.parquet` files directly in `dir` (not `_staging/`), sorted.
fn published_rows(dir: &Path) -> Vec<Row> {
    let mut rows = Vec::new();
    let entries = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("the output directory {}: {e}", dir.display()));
    for entry in entries {
        let entry = entry.expect("directory entry");
        let name = entry.file_name().to_string_lossy().into_owned();
        if !(name.starts_with("part-") && name.ends_with(".parquet")) {
            continue;
        }
        let path = entry.path();
        let file = File::open(&path).expect("open a part file");
        let reader = ParquetRecordBatchReaderBuilder::try_new(file)
            .and_then(|b| b.build())
            .unwrap_or_else(|e| panic!("{name} is not a readable Parquet file: {e}"));
        for batch in reader {
            let batch = batch.unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(batch.num_columns(), 6, "{name}: {:?}", batch.schema());
            let columns: Vec<Int64Array> = batch
                .columns()
                .iter()
                .map(|c| {
                    assert_eq!(c.null_count(), 0, "{name}: a null in {:?}", batch.schema());
                    let ints = cast(c, &DataType::Int64).expect("an integer or timestamp column");
                    ints.as_any()
                        .downcast_ref::<Int64Array>()
                        .expect("cast to Int64")
                        .clone()
                })
                .collect();
            for i in 0..batch.num_rows() {
                rows.push(std::array::from_fn(|c| columns[c].value(i)));
            }
        }
    }
    rows.sort_unstable();
    rows
}

/// How many files called `name` there are under `dir`, at any depth.
fn files_named(dir: &Path, name: &str) -> usize {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("the directory {}: {e}", dir.display()));
    entries
        .map(|entry| {
            let entry = entry.expect("directory entry");
            if entry.file_type().expect("file type").is_dir() {
                files_named(&entry.path(), name)
            } else {
                usize::from(entry.file_name() == name)
            }
        })
        .sum()
}

/// How two sorted multisets of rows differ.
struct Diff {
    expected: usize,
    actual: usize,
    /// Rows the actual output has fewer times than the expected one, with how many fewer.
    missing: Vec<(Row, usize)>,
    /// Rows the actual output has more times, with how many more.
    extra: Vec<(Row, usize)>,
    /// The first position where the sorted outputs differ, and the rows there.
    first: (usize, Option<Row>, Option<Row>),
}

impl Diff {
    fn of(expected: &[Row], actual: &[Row]) -> Option<Diff> {
        if expected == actual {
            return None;
        }
        let mut counts: BTreeMap<Row, i64> = BTreeMap::new();
        for row in expected {
            *counts.entry(*row).or_default() += 1;
        }
        for row in actual {
            *counts.entry(*row).or_default() -= 1;
        }
        let missing = counts
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(r, n)| (*r, n.unsigned_abs() as usize))
            .collect();
        let extra = counts
            .iter()
            .filter(|(_, n)| **n < 0)
            .map(|(r, n)| (*r, n.unsigned_abs() as usize))
            .collect();
        let at = expected
            .iter()
            .zip(actual)
            .position(|(e, a)| e != a)
            .unwrap_or(expected.len().min(actual.len()));
        Some(Diff {
            expected: expected.len(),
            actual: actual.len(),
            missing,
            extra,
            first: (at, expected.get(at).copied(), actual.get(at).copied()),
        })
    }
}

impl fmt::Display for Diff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 10;
        let total = |rows: &[(Row, usize)]| rows.iter().map(|(_, n)| n).sum::<usize>();
        writeln!(
            f,
            "expected {} rows, got {}: {} missing ({} distinct), {} duplicated or unexpected \
             ({} distinct); rows are [auction, window_start ms, window_end ms, count, sum, max]",
            self.expected,
            self.actual,
            total(&self.missing),
            self.missing.len(),
            total(&self.extra),
            self.extra.len()
        )?;
        let (at, want, got) = &self.first;
        writeln!(
            f,
            "first difference of the sorted rows at {at}: expected {want:?}, got {got:?}"
        )?;
        let windows: std::collections::BTreeSet<i64> = (self.missing.iter())
            .chain(&self.extra)
            .map(|(row, _)| row[1])
            .collect();
        if let (Some(first), Some(last)) = (windows.first(), windows.last()) {
            writeln!(
                f,
                "{} windows differ, starting from {first} to {last} ms ({} to {} s after the \
                 first input time)",
                windows.len(),
                (first - BASE_MS) / 1_000,
                (last - BASE_MS) / 1_000
            )?;
        }
        for (row, n) in self.missing.iter().take(SHOWN) {
            writeln!(f, "  missing {n}x {row:?}")?;
        }
        for (row, n) in self.extra.iter().take(SHOWN) {
            writeln!(f, "  extra   {n}x {row:?}")?;
        }
        Ok(())
    }
}

/// A running `weir run`, its stderr read line by line on a thread. Dropping it kills the process,
/// so a failing test leaves none behind.
struct Weir {
    child: Child,
    lines: Receiver<String>,
    reader: Option<JoinHandle<()>>,
    stderr: Vec<String>,
}

impl Weir {
    fn spawn(job: &Job, restore: bool, fail_point: Option<String>) -> Self {
        let summary = File::create(&job.summary).expect("create the summary file");
        let mut command = Command::new(env!("CARGO_BIN_EXE_weir"));
        command
            .arg("run")
            .arg(&job.script)
            .arg("--checkpoint-dir")
            .arg(&job.checkpoints)
            .arg("--json")
            .current_dir(&job.dir)
            .env("RUST_LOG", "warn")
            .env("NO_COLOR", "1")
            .env_remove("WEIR_FAILPOINT")
            .stdin(Stdio::null())
            .stdout(summary)
            .stderr(Stdio::piped());
        if restore {
            command.args(["--restore", "latest"]);
        }
        if let Some(fail_point) = fail_point {
            command.env("WEIR_FAILPOINT", fail_point);
        }
        let mut child = command.spawn().expect("spawn weir");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, lines) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Weir {
            child,
            lines,
            reader: Some(reader),
            stderr: Vec::new(),
        }
    }

    /// Runs the process until it ends by itself or `kill` says to kill it.
    fn drive(&mut self, kill: &Kill) -> Outcome {
        let started = Instant::now();
        let (deadline, fail_point) = match kill {
            Kill::At { name, .. } => (started + RUN_TIMEOUT, Some(*name)),
            Kill::After(delay) => (started + *delay, None),
            Kill::Never => (started + RUN_TIMEOUT, None),
        };
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let reached = fail_point.filter(|name| is_fail_point_line(&line, name));
                    self.stderr.push(line);
                    if let Some(name) = reached {
                        return match self.kill() {
                            s if s.signal() == Some(SIGKILL) => Outcome::KilledAtFailPoint(name),
                            s => Self::ended(s),
                        };
                    }
                }
                // stderr closed: the process is ending by itself.
                Err(RecvTimeoutError::Disconnected) => return Self::ended(self.wait()),
                Err(RecvTimeoutError::Timeout) => {
                    if !matches!(kill, Kill::After(_)) {
                        self.stderr.push(format!(
                            "(harness: no end and no fail point in {} s: killed)",
                            RUN_TIMEOUT.as_secs()
                        ));
                    }
                    let status = self.kill();
                    return match kill {
                        _ if status.signal() != Some(SIGKILL) => Self::ended(status),
                        // A run that must end by itself and hangs is a failure.
                        Kill::Never => Outcome::Failed(status),
                        Kill::At { .. } | Kill::After(_) => Outcome::Killed,
                    };
                }
            }
        }
    }

    /// What an exit the harness did not cause means.
    fn ended(status: ExitStatus) -> Outcome {
        if status.success() {
            Outcome::Finished
        } else {
            Outcome::Failed(status)
        }
    }

    /// SIGKILL, then the exit status (which says whether the process had already exited).
    fn kill(&mut self) -> ExitStatus {
        // Fails only when the process was already reaped, which `wait` below reports.
        let _ = self.child.kill();
        self.wait()
    }

    /// Waits for the process and the rest of its stderr.
    fn wait(&mut self) -> ExitStatus {
        let status = self.child.wait().expect("wait for weir");
        if let Some(reader) = self.reader.take() {
            reader.join().expect("the stderr reader");
        }
        self.stderr.extend(self.lines.try_iter());
        status
    }

    fn stderr(&self) -> String {
        self.stderr.join("\n")
    }
}

impl Drop for Weir {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `weir: failpoint <name> reached` (with or without the `@n`).
fn is_fail_point_line(line: &str, name: &str) -> bool {
    line.strip_prefix("weir: failpoint ")
        .and_then(|rest| rest.strip_suffix(" reached"))
        .is_some_and(|point| point == name || point.split('@').next() == Some(name))
}

fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(
        value
            .parse()
            .unwrap_or_else(|e| panic!("{name}={value}: not a number: {e}")),
    )
}

fn clock_seed() -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970");
    now.as_secs() ^ (u64::from(now.subsec_nanos()) << 20)
}
