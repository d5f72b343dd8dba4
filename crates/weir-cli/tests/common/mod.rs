//! What the crash harnesses share (`crash.rs`, the file round, and `kafka_crash.rs`, the Kafka
//! round): a `weir run` process driven and SIGKILLed at a random moment or at a named fail
//! point, the kill schedule, the rounds of kills and restores with `--restore latest`, and the
//! multiset difference of two outputs.
//!
//! Each test binary compiles this module on its own and uses most, not all, of it.
#![allow(dead_code)]

use arrow::array::{Array, Int64Array};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The fail points the runtime offers (`WEIR_FAILPOINT=<name>@<n>`).
pub const FAIL_POINTS: [&str; 5] = [
    "after-pre-commit",
    "after-segments",
    "after-manifest",
    "mid-commit",
    "mid-restore",
];
/// Only reachable by a run that restores.
const RESTORE_FAIL_POINTS: [&str; 2] = ["mid-restore", "mid-recovery-commit"];
/// Random kills land this long after the spawn: long enough for a restarted job to get past
/// restore and a checkpoint or two, so rounds end.
const MIN_DELAY_MS: u64 = 150;
const MAX_DELAY_MS: u64 = 1_500;
/// A run that neither ends nor reaches its fail point in this time is killed anyway.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(90);
/// A round that needs more restarts than this is not making progress.
const MAX_ATTEMPTS_PER_ROUND: u32 = 150;
/// The signal `Child::kill` sends; its number is the same on every Unix.
const SIGKILL: i32 = 9;

/// The crash rounds: each a fresh job killed and restored until it ends by itself.
pub struct Rounds {
    pub seed: u64,
    pub kills_wanted: u64,
    pub schedule: Schedule,
    pub tally: Tally,
    /// Every attempt of every round, for failure messages.
    pub log: Vec<String>,
    /// Rounds that ended.
    pub done: u32,
}

impl Rounds {
    pub fn new(seed: u64, kills_wanted: u64, schedule: Schedule) -> Self {
        Rounds {
            seed,
            kills_wanted,
            schedule,
            tally: Tally::default(),
            log: Vec::new(),
            done: 0,
        }
    }

    /// Spawns the job, kills it as the schedule says and restarts it with `--restore latest`
    /// until a run ends by itself. Once enough kills are done, the restarted run is left to end.
    /// `on_finish` describes the run that ended, for its line in the log.
    pub fn run(&mut self, job: &Job, on_finish: &dyn Fn(&Job) -> String) {
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
            if matches!(outcome, Outcome::Finished) {
                line.push_str(&on_finish(job));
            }
            // Shown with --nocapture, and by the test harness when the test fails.
            println!("{line}");
            job.log_attempt(&line);
            self.log.push(line);
            let stderr = job.dir.join(format!("stderr-{attempt}.log"));
            std::fs::write(stderr, weir.stderr()).expect("keep the run's stderr");
            match outcome {
                Outcome::Finished => {
                    self.done = round;
                    return;
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

    /// Fails the test when `kills_wanted` is at least `min_kills` and some fail point was
    /// never reached.
    pub fn assert_every_fail_point_reached(&self, min_kills: u64) {
        if self.kills_wanted < min_kills {
            return;
        }
        let missed: Vec<_> = (self.schedule.points.iter())
            .filter(|name| !self.tally.reached.contains_key(**name))
            .collect();
        assert!(
            missed.is_empty(),
            "fail points never reached in {} kills (seed {}): {missed:?}\n{}",
            self.tally.kills(),
            self.seed,
            self.log.join("\n")
        );
    }
}

/// The test's directory, removed when the test passes and kept when it fails: a failed round's
/// directory holds its checkpoints (as each restarted run found them, in
/// `checkpoints-before-<attempt>`), `attempts.log` and every run's stderr.
pub struct Evidence(Option<tempfile::TempDir>);

impl Evidence {
    pub fn new() -> Self {
        Evidence(Some(tempfile::tempdir().expect("tempdir")))
    }

    pub fn path(&self) -> &Path {
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
pub struct Tally {
    pub at_fail_points: u64,
    pub at_random: u64,
    pub reached: BTreeMap<&'static str, u64>,
}

impl Tally {
    pub fn kills(&self) -> u64 {
        self.at_fail_points + self.at_random
    }
}

/// When to kill a run.
#[derive(Debug, Clone)]
pub enum Kill {
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
pub enum Outcome {
    /// Exit status 0: the input is done.
    Finished,
    /// SIGKILLed after reporting this fail point.
    KilledAtFailPoint(&'static str),
    /// SIGKILLed at a random moment (or when its fail point took too long).
    Killed,
    /// Any other exit: a bug, or (where the test causes it) a lost dependency.
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

/// The kill schedule: a coin between a fail point (each in turn) and a random delay.
pub struct Schedule {
    rng: XorShift,
    /// The fail points asked for.
    points: &'static [&'static str],
    next_fail_point: usize,
    /// Whether a fail point not reached yet is asked for before any random kill (so that a
    /// short run of the test still meets every one).
    cover_first: bool,
}

impl Schedule {
    /// A schedule over every fail point of the runtime.
    pub fn new(seed: u64) -> Self {
        Schedule {
            rng: XorShift::new(seed),
            points: &FAIL_POINTS,
            next_fail_point: 0,
            cover_first: false,
        }
    }

    /// A schedule over `points` that first asks for each once, in order (`mid-restore` when a
    /// run restores), then goes on as [`Schedule::new`] does.
    pub fn covering(seed: u64, points: &'static [&'static str]) -> Self {
        Schedule {
            points,
            cover_first: true,
            ..Schedule::new(seed)
        }
    }

    /// The kill for the next run; `restores`: whether that run restores a checkpoint. A fail
    /// point not reached yet is asked for at its first occurrence, so each is seen early.
    pub fn next(&mut self, restores: bool, tally: &Tally) -> Kill {
        if self.cover_first {
            let unreached = self.points.iter().find(|name| {
                !tally.reached.contains_key(**name)
                    && (restores || !RESTORE_FAIL_POINTS.contains(*name))
            });
            if let Some(name) = unreached {
                return Kill::At { name, nth: 1 };
            }
        }
        let name = self.points[self.next_fail_point];
        if self.rng.below(2) == 0 && (restores || !RESTORE_FAIL_POINTS.contains(&name)) {
            self.next_fail_point = (self.next_fail_point + 1) % self.points.len();
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
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> Self {
        // Zero is the one state xorshift never leaves.
        XorShift((seed ^ 0x9e37_79b9_7f4a_7c15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform enough in `0..n` for n far below 2^64.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A job's directory: the SQL script, the checkpoint directory, the last run's JSON summary
/// and the log of its attempts.
pub struct Job {
    pub dir: PathBuf,
    pub script: PathBuf,
    pub checkpoints: PathBuf,
    pub summary: PathBuf,
}

impl Job {
    /// Creates `dir` with an empty checkpoint directory and `sql` as the job's script.
    pub fn create(dir: &Path, sql: &str) -> Self {
        let checkpoints = dir.join("checkpoints");
        std::fs::create_dir_all(&checkpoints).expect("create the checkpoint directory");
        let script = dir.join("job.sql");
        std::fs::write(&script, sql).expect("write the job");
        Job {
            dir: dir.to_path_buf(),
            script,
            checkpoints,
            summary: dir.join("summary.json"),
        }
    }

    /// The last run's JSON summary, if it wrote one.
    pub fn summary(&self) -> Option<serde_json::Value> {
        let bytes = std::fs::read(&self.summary).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// What the last run's summary says it restored from; informative only, so a summary
    /// without the field is not an error.
    pub fn restored_from(&self) -> String {
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

    /// Appends `line` to the job's `attempts.log`.
    pub fn log_attempt(&self, line: &str) {
        let mut attempts = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("attempts.log"))
            .expect("open the round's attempt log");
        writeln!(attempts, "{line}").expect("log the attempt");
    }
}

/// Copies a directory tree, to keep the checkpoints a run started from.
pub fn copy_dir(from: &Path, to: &Path) {
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

/// How many files called `name` there are under `dir`, at any depth.
pub fn files_named(dir: &Path, name: &str) -> usize {
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
pub struct Diff<R> {
    pub expected: usize,
    pub actual: usize,
    /// Rows the actual output has fewer times than the expected one, with how many fewer.
    pub missing: Vec<(R, usize)>,
    /// Rows the actual output has more times, with how many more.
    pub extra: Vec<(R, usize)>,
    /// The first position where the sorted outputs differ, and the rows there.
    pub first: (usize, Option<R>, Option<R>),
    /// What a row's fields are, for the message.
    pub legend: &'static str,
    /// More lines the caller adds after the first difference.
    pub note: String,
}

impl<R: Ord + Clone + fmt::Debug> Diff<R> {
    /// `None` when the sorted `expected` and `actual` are equal.
    pub fn of(expected: &[R], actual: &[R], legend: &'static str) -> Option<Diff<R>> {
        if expected == actual {
            return None;
        }
        let mut counts: BTreeMap<&R, i64> = BTreeMap::new();
        for row in expected {
            *counts.entry(row).or_default() += 1;
        }
        for row in actual {
            *counts.entry(row).or_default() -= 1;
        }
        let differing = |more: bool| {
            counts
                .iter()
                .filter(|(_, n)| if more { **n > 0 } else { **n < 0 })
                .map(|(r, n)| ((*r).clone(), n.unsigned_abs() as usize))
                .collect()
        };
        let at = expected
            .iter()
            .zip(actual)
            .position(|(e, a)| e != a)
            .unwrap_or(expected.len().min(actual.len()));
        Some(Diff {
            expected: expected.len(),
            actual: actual.len(),
            missing: differing(true),
            extra: differing(false),
            first: (at, expected.get(at).cloned(), actual.get(at).cloned()),
            legend,
            note: String::new(),
        })
    }

    /// How many rows are missing, counting repeats.
    pub fn missing_rows(&self) -> usize {
        self.missing.iter().map(|(_, n)| n).sum()
    }

    /// How many rows are there too often or should not be there, counting repeats.
    pub fn extra_rows(&self) -> usize {
        self.extra.iter().map(|(_, n)| n).sum()
    }
}

impl<R: fmt::Debug> fmt::Display for Diff<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 10;
        let total = |rows: &[(R, usize)]| rows.iter().map(|(_, n)| n).sum::<usize>();
        writeln!(
            f,
            "expected {} rows, got {}: {} missing ({} distinct), {} duplicated or unexpected \
             ({} distinct); rows are {}",
            self.expected,
            self.actual,
            total(&self.missing),
            self.missing.len(),
            total(&self.extra),
            self.extra.len(),
            self.legend
        )?;
        let (at, want, got) = &self.first;
        writeln!(
            f,
            "first difference of the sorted rows at {at}: expected {want:?}, got {got:?}"
        )?;
        f.write_str(&self.note)?;
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
pub struct Weir {
    child: Child,
    lines: Receiver<String>,
    reader: Option<JoinHandle<()>>,
    stderr: Vec<String>,
}

impl Weir {
    pub fn spawn(job: &Job, restore: bool, fail_point: Option<String>) -> Self {
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
    pub fn drive(&mut self, kill: &Kill) -> Outcome {
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

    /// Reads stderr until a line contains `needle` (true), or the process ends or `timeout`
    /// passes (false); the lines read are kept for [`Weir::stderr`].
    pub fn wait_for_line(&mut self, needle: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let found = line.contains(needle);
                    self.stderr.push(line);
                    if found {
                        return true;
                    }
                }
                Err(_) => return false,
            }
        }
    }

    /// Whether the process has exited (it is then left for `drive` to reap its status).
    pub fn has_exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    pub fn stderr(&self) -> String {
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

/// The value of environment variable `name` as a number, if it is set.
pub fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(
        value
            .parse()
            .unwrap_or_else(|e| panic!("{name}={value}: not a number: {e}")),
    )
}

/// A kill-schedule seed from the clock.
pub fn clock_seed() -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970");
    now.as_secs() ^ (u64::from(now.subsec_nanos()) << 20)
}

/// Every row of the committed `part-*.parquet` files directly in `dir` (not `_staging/`), each
/// column cast to Int64 (integers, timestamps), sorted. Every file must have `N` columns.
pub fn published_parquet_rows<const N: usize>(dir: &Path) -> Vec<[i64; N]> {
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
            assert_eq!(batch.num_columns(), N, "{name}: {:?}", batch.schema());
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
