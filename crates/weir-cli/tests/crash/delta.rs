//! The proof of the Delta sink's commit protocol through `weir run`: the crash harness's bids
//! (the same files, out-of-order and late rows and all) through an event-time tumbling window
//! into a Delta table, the late rows routed into a second one, both with `auto-compaction` on
//! and a small `compaction.min-files` (parallelism 2, a checkpoint every 200 ms; the source
//! reads small batches so that a run lasts several epochs). The job is
//! SIGKILLed at every fail point of the runtime's checkpoint protocol and of the Delta sink's
//! commit protocol (each at its first and a later hit) and at random moments, and restarted
//! with `--restore latest` until it finishes. Then, read by the Python `deltalake` reader
//! (delta-rs, from the test kit):
//!
//! - each table holds exactly the rows of a run that never failed, as multisets (nothing lost,
//!   nothing twice), and that run holds exactly the rows the test computes from the files;
//! - every commit of each table is its creation (version 0), a `STREAMING UPDATE` carrying the
//!   sink's transaction (`txn`) or an `OPTIMIZE`, and an epoch (txn version) is in at most one
//!   commit, the versions rising with the log (read from the `_delta_log` commit files).
//!
//! A machine without `python3` fails the test with the kit's NOT RUN message.

use super::common::{
    self, Evidence, Job, Kill, Outcome, Weir, XorShift, clock_seed, env_u64, files_named,
};
use super::{LateRow, Row};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use weir_testkit::delta_readers::{DeltaStorage, delta_python_history, delta_python_rows};

/// Each fail point with the hits it is armed at: the first and a later one. `mid-restore` is
/// met once per run; `mid-recovery-commit` once per sink with epochs to commit again (two).
const KILLS: [(&str, u64); 17] = [
    ("after-pre-commit", 1),
    ("delta-before-commit", 1),
    ("delta-after-commit", 1),
    ("mid-restore", 1),
    ("delta-mid-compaction", 1),
    ("after-segments", 1),
    ("after-manifest", 1),
    ("mid-recovery-commit", 1),
    ("mid-commit", 1),
    ("after-pre-commit", 3),
    ("delta-before-commit", 3),
    ("delta-after-commit", 3),
    ("mid-recovery-commit", 2),
    ("delta-mid-compaction", 3),
    ("after-segments", 3),
    ("after-manifest", 3),
    ("mid-commit", 3),
];
/// Fail points only a run that restores a checkpoint meets.
const ON_RESTORE: [&str; 2] = ["mid-restore", "mid-recovery-commit"];
/// Random kills mixed into the fail points (one after every few), unless `WEIR_CRASH_KILLS`
/// says how many.
const RANDOM_KILLS: u64 = 4;
/// Rounds (fresh jobs run until they finish) before the test gives up on reaching the rest of
/// the fail points.
const MAX_ROUNDS: u32 = 8;
/// Restarts of one round before it is taken for stuck.
const MAX_ATTEMPTS: u32 = 40;

/// The Delta tables of a job: the windows and the late rows.
const WINDOWS: &str = "per_auction";
const LATE: &str = "late_bids";

#[test]
fn killed_and_restored_runs_commit_to_delta_exactly_the_rows_of_a_run_that_never_failed() {
    let seed = env_u64("WEIR_CRASH_SEED").unwrap_or_else(clock_seed);
    let random_kills = env_u64("WEIR_CRASH_KILLS").unwrap_or(RANDOM_KILLS);
    println!("delta crash harness: seed {seed} (set WEIR_CRASH_SEED={seed} to repeat it)");
    let evidence = Evidence::new();
    let work = evidence.path();
    let input = work.join("in");
    let (reference, late_reference) = super::write_input(&input);

    // The run that never fails, against what the test computed from the files.
    let started = Instant::now();
    let golden_job = job(&work.join("golden"), &input);
    let mut golden_run = Weir::spawn(&golden_job, false, None);
    match golden_run.drive(&Kill::Never) {
        Outcome::Finished => {}
        other => panic!(
            "the run without kills did not finish: {other}\n{}",
            golden_run.stderr()
        ),
    }
    let golden_windows: Vec<Row> = table_rows(&golden_job, WINDOWS);
    let golden_late: Vec<LateRow> = table_rows(&golden_job, LATE);
    let golden_log = check_log(&golden_job, WINDOWS, "the run without kills");
    check_log(&golden_job, LATE, "the run without kills");
    println!(
        "delta crash harness: golden run took {:.1} s: {} windows, {} late rows; {} commits \
         ({} epochs, {} compactions) of `{WINDOWS}`",
        started.elapsed().as_secs_f64(),
        golden_windows.len(),
        golden_late.len(),
        golden_log.commits,
        golden_log.epochs,
        golden_log.compactions,
    );
    if let Some(diff) = super::row_diff(&reference, &golden_windows) {
        panic!("the run without kills committed other windows than the test computed:\n{diff}");
    }
    if let Some(diff) = super::late_diff(&late_reference, &golden_late) {
        panic!("the run without kills committed other late rows than the test computed:\n{diff}");
    }
    assert_eq!(super::dropped_late(&golden_job), 0, "late rows are routed");
    assert!(
        golden_log.epochs >= 4 && golden_log.compactions >= 1,
        "the run without kills made too few epoch commits or no compaction: {golden_log:?}"
    );

    // The kills: every fail point at its hits, random moments in between.
    let mut rng = XorShift::new(seed);
    let mut pending: VecDeque<Kill> = VecDeque::new();
    for (i, (name, nth)) in KILLS.iter().enumerate() {
        pending.push_back(Kill::At { name, nth: *nth });
        if random_kills > 0 && (i as u64).is_multiple_of((KILLS.len() as u64 / random_kills).max(1))
        {
            pending.push_back(Kill::After(Duration::from_millis(300 + rng.below(2_500))));
        }
    }
    let mut reached: BTreeMap<String, u64> = BTreeMap::new();
    let mut log: Vec<String> = Vec::new();
    let mut random = 0;
    let mut round = 0;
    while !pending.is_empty() {
        round += 1;
        assert!(
            round <= MAX_ROUNDS,
            "fail points not reached in {MAX_ROUNDS} rounds: {pending:?}\n{}",
            log.join("\n")
        );
        let job = job(&work.join(format!("round-{round}")), &input);
        let mut attempt = 0;
        loop {
            attempt += 1;
            assert!(
                attempt <= MAX_ATTEMPTS,
                "round {round} did not finish in {MAX_ATTEMPTS} runs\n{}",
                log.join("\n")
            );
            let restore = attempt > 1;
            let restores = restore && files_named(&job.checkpoints, "manifest.json") > 0;
            // The first kill this run can meet; one only a restore meets waits for a run that
            // restores.
            let at = pending.iter().position(|k| match k {
                Kill::At { name, .. } => restores || !ON_RESTORE.contains(name),
                _ => true,
            });
            let kill = at.and_then(|i| pending.remove(i)).unwrap_or(Kill::Never);
            if restore {
                common::copy_dir(
                    &job.checkpoints,
                    &job.dir.join(format!("checkpoints-before-{attempt}")),
                );
            }
            let started = Instant::now();
            let env = match &kill {
                Kill::At { name, nth } => Some(format!("{name}@{nth}")),
                _ => None,
            };
            let mut run = Weir::spawn(&job, restore, env);
            let outcome = run.drive(&kill);
            let line = format!(
                "round {round} run {attempt}: {kill} -> {outcome} after {} ms",
                started.elapsed().as_millis()
            );
            println!("{line}");
            job.log_attempt(&line);
            log.push(line);
            std::fs::write(job.dir.join(format!("stderr-{attempt}.log")), run.stderr())
                .expect("keep the run's stderr");
            match outcome {
                Outcome::KilledAtFailPoint(_) => {
                    if let Kill::At { name, nth } = &kill {
                        *reached.entry(format!("{name}@{nth}")).or_default() += 1;
                    }
                }
                Outcome::Killed => match kill {
                    Kill::After(_) => random += 1,
                    // Armed but neither reached nor finished in time: try it again later.
                    other => pending.push_back(other),
                },
                Outcome::Finished => {
                    if let Kill::At { .. } = kill {
                        // The run ended before the point's hit: a later run meets it.
                        pending.push_front(kill);
                    }
                    break;
                }
                Outcome::Failed(status) => panic!(
                    "round {round} run {attempt}: weir failed with {status}\n{}\nruns:\n{}",
                    run.stderr(),
                    log.join("\n")
                ),
            }
        }
        let what = format!("round {round} (seed {seed})");
        let windows: Vec<Row> = table_rows(&job, WINDOWS);
        if let Some(diff) = super::row_diff(&golden_windows, &windows) {
            panic!(
                "{what}: `{WINDOWS}` holds other rows than the run without kills:\n{diff}\n\
                 runs:\n{}",
                log.join("\n")
            );
        }
        let late: Vec<LateRow> = table_rows(&job, LATE);
        if let Some(diff) = super::late_diff(&golden_late, &late) {
            panic!(
                "{what}: `{LATE}` holds other rows than the run without kills:\n{diff}\nruns:\n{}",
                log.join("\n")
            );
        }
        let windows_log = check_log(&job, WINDOWS, &what);
        let late_log = check_log(&job, LATE, &what);
        println!(
            "delta crash harness: round {round} matches the run without kills ({} runs; \
             `{WINDOWS}`: {windows_log:?}; `{LATE}`: {late_log:?})",
            attempt
        );
        std::fs::remove_dir_all(&job.dir).expect("remove the round's directory");
    }
    let missing: Vec<String> = KILLS
        .iter()
        .map(|(name, nth)| format!("{name}@{nth}"))
        .filter(|k| !reached.contains_key(k))
        .collect();
    assert!(missing.is_empty(), "never reached: {missing:?}");
    println!(
        "delta crash harness: {} kills at fail points {reached:?}, {random} at random moments, \
         {round} rounds, {:.1} s in all",
        reached.values().sum::<u64>(),
        started.elapsed().as_secs_f64()
    );
}

/// The job of a round in `dir`: the crash harness's window over the bids in `input`, into the
/// Delta table `dir/per_auction`, its late rows into `dir/late_bids`.
fn job(dir: &Path, input: &Path) -> Job {
    let delta = |table: &str| {
        format!(
            "'connector' = 'delta', 'path' = '{}', 'auto-compaction' = 'true', \
             'compaction.min-files' = '3', 'delta.checkpointInterval' = '10'",
            table_dir(dir, table).display()
        )
    };
    let sql = format!(
        "SET 'parallelism' = '2';\n\
         SET 'checkpoint.interval' = '200ms';\n\
         SET 'late.policy' = 'route';\n\
         SET 'late.sink' = '{LATE}';\n\
         CREATE TABLE bids (\n\
         \x20 auction BIGINT NOT NULL,\n\
         \x20 price BIGINT NOT NULL,\n\
         \x20 date_time BIGINT NOT NULL,\n\
         \x20 ts AS TO_TIMESTAMP_MILLIS(date_time),\n\
         \x20 WATERMARK FOR ts AS ts - INTERVAL '1' SECOND\n\
         ) WITH ('connector' = 'filesystem', 'path' = '{}/bids-*.csv', 'format' = 'csv',\n\
         \x20 'batch-size' = '256');\n\
         CREATE TABLE {WINDOWS} (\n\
         \x20 auction BIGINT, window_start TIMESTAMP(3), window_end TIMESTAMP(3),\n\
         \x20 bids BIGINT, total BIGINT, top BIGINT\n\
         ) WITH ({});\n\
         CREATE TABLE {LATE} (auction BIGINT, price BIGINT, ts TIMESTAMP(3)) WITH ({});\n\
         INSERT INTO {WINDOWS}\n\
         SELECT auction, window_start, window_end, COUNT(*), SUM(price), MAX(price)\n\
         FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '1' SECOND))\n\
         GROUP BY auction, window_start, window_end;\n",
        input.display(),
        delta(WINDOWS),
        delta(LATE),
    );
    Job::create(dir, &sql)
}

fn table_dir(dir: &Path, table: &str) -> PathBuf {
    dir.join(table)
}

/// Every row of the newest version of a job's table, read by the Python `deltalake` reader,
/// each column as an integer (timestamps in milliseconds), sorted. Without Python the test
/// fails with the kit's NOT RUN message.
fn table_rows<const N: usize>(job: &Job, table: &str) -> Vec<[i64; N]> {
    let path = table_dir(&job.dir, table);
    let read = delta_python_rows(&path.display().to_string(), None, &DeltaStorage::Local)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let columns = read.column_names();
    assert_eq!(columns.len(), N, "{table}: {columns:?}");
    let mut rows: Vec<[i64; N]> = read
        .rows
        .iter()
        .map(|row| std::array::from_fn(|c| integer(&row[columns[c]], table)))
        .collect();
    rows.sort_unstable();
    rows
}

/// A value the reader printed as an integer: a number, or a timestamp
/// (`2023-11-14T22:13:20.000000`, with or without `Z`) in milliseconds since the epoch.
fn integer(value: &Value, table: &str) -> i64 {
    if let Some(n) = value.as_i64() {
        return n;
    }
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("{table}: not an integer or timestamp: {value}"));
    fn bad<T>(table: &str, text: &str) -> T {
        panic!("{table}: not a timestamp: {text}")
    }
    let (date, time) =
        (text.trim_end_matches('Z').split_once('T')).unwrap_or_else(|| bad(table, text));
    let num = |s: &str| s.parse::<i64>().unwrap_or_else(|_| bad(table, text));
    let d: Vec<i64> = date.split('-').map(num).collect();
    let (hms, fraction) = time.split_once('.').unwrap_or((time, "0"));
    let t: Vec<i64> = hms.split(':').map(num).collect();
    if d.len() != 3 || t.len() != 3 {
        bad::<()>(table, text);
    }
    // Micro- or nanoseconds to milliseconds.
    let millis = num(&format!("{fraction:0<9}")[..3]);
    let seconds = days_from_civil(d[0], d[1], d[2]) * 86_400 + t[0] * 3_600 + t[1] * 60 + t[2];
    seconds * 1_000 + millis
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// What a table's log holds.
#[derive(Debug, Default)]
#[allow(dead_code)]
struct LogSummary {
    /// Commits after the table's creation.
    commits: usize,
    /// `STREAMING UPDATE` commits, one per epoch.
    epochs: usize,
    /// `OPTIMIZE` commits.
    compactions: usize,
}

/// Checks the commits of a job's table: in the Python reader's history, version 0 creates the
/// table and every later commit is a `STREAMING UPDATE` or an `OPTIMIZE`; in the commit files,
/// each streaming update carries one `txn` of the sink's application id whose version (the
/// epoch) is above every earlier one (so no epoch is in two commits) and is the commit's
/// `epochId`, and an optimize carries none and changes no data.
fn check_log(job: &Job, table: &str, what: &str) -> LogSummary {
    let path = table_dir(&job.dir, table);
    let log_dir = path.join("_delta_log");
    let mut versions: Vec<(u64, PathBuf)> = std::fs::read_dir(&log_dir)
        .unwrap_or_else(|e| panic!("{what}: {}: {e}", log_dir.display()))
        .filter_map(|e| {
            let path = e.expect("a log entry").path();
            let name = path.file_name()?.to_str()?.to_owned();
            Some((name.strip_suffix(".json")?.parse().ok()?, path))
        })
        .collect();
    versions.sort();
    let mut summary = LogSummary::default();
    let mut app_ids = BTreeSet::new();
    let mut last_epoch: Option<(i64, u64)> = None;
    let mut operations = BTreeMap::new();
    for (version, file) in &versions {
        let text = std::fs::read_to_string(file).expect("read a commit");
        let actions: Vec<Map<String, Value>> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).expect("a JSON action"))
            .collect();
        let info = actions
            .iter()
            .find_map(|a| a.get("commitInfo"))
            .unwrap_or_else(|| panic!("{what}: `{table}` version {version} has no commitInfo"));
        let operation = info["operation"].as_str().unwrap_or_default().to_owned();
        let txns: Vec<&Value> = actions.iter().filter_map(|a| a.get("txn")).collect();
        let context = || format!("{what}: `{table}` version {version} ({operation}): {text}");
        match operation.as_str() {
            "CREATE TABLE" => assert_eq!(*version, 0, "{}", context()),
            "STREAMING UPDATE" => {
                assert_eq!(txns.len(), 1, "one txn per epoch commit: {}", context());
                let epoch = txns[0]["version"].as_i64().expect("a txn version");
                app_ids.insert(txns[0]["appId"].as_str().unwrap_or_default().to_owned());
                let epoch_id = &info["operationParameters"]["epochId"];
                assert!(
                    epoch_id.as_i64() == Some(epoch)
                        || epoch_id.as_str() == Some(&epoch.to_string()),
                    "the txn version is the commit's epoch: {}",
                    context()
                );
                if let Some((before, at)) = last_epoch {
                    assert!(
                        epoch > before,
                        "epoch {epoch} committed at version {version} after epoch {before} at \
                         version {at}: {}",
                        context()
                    );
                }
                last_epoch = Some((epoch, *version));
                summary.epochs += 1;
            }
            "OPTIMIZE" => {
                assert!(txns.is_empty(), "{}", context());
                assert!(!text.contains("\"dataChange\":true"), "{}", context());
                summary.compactions += 1;
            }
            _ => panic!("an unexpected commit: {}", context()),
        }
        operations.insert(*version, operation);
        if *version > 0 {
            summary.commits += 1;
        }
    }
    assert_eq!(
        app_ids.len(),
        1,
        "{what}: `{table}` is written by one sink: {app_ids:?}"
    );
    // The same history as another Delta implementation reads it.
    let app_id = app_ids.first().expect("an application id").clone();
    let history = delta_python_history(
        &path.display().to_string(),
        &[&app_id],
        &DeltaStorage::Local,
    )
    .unwrap_or_else(|e| panic!("{what}: the history of {}: {e}", path.display()));
    let read: BTreeMap<u64, String> = history
        .commits
        .iter()
        .map(|c| (c.version, c.operation.clone().unwrap_or_default()))
        .collect();
    assert_eq!(
        read, operations,
        "{what}: `{table}`: the Python reader's history"
    );
    let last = last_epoch.map(|(epoch, _)| epoch as u64);
    assert_eq!(
        history.app_version(&app_id),
        last,
        "{what}: `{table}`: the txn version of {app_id} is the newest epoch committed"
    );
    summary
}
