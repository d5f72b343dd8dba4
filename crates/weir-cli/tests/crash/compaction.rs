//! The proof of recovery for the file sink's auto-compaction: the crash harness's job with both
//! Parquet sinks compacting (`'auto-compaction' = 'true'`, a small `'compaction.file-size'` so
//! that merges happen all through a run), killed with SIGKILL inside a merge (`file-mid-merge`:
//! the merged file written into staging, not published; `file-after-merge`: published, its
//! inputs not deleted), at the runtime's commit and recovery fail points and at random moments,
//! restarted with `--restore latest` until its input is done. What it published must equal, as
//! multisets of rows, what the job without compaction publishes run once without kills.

use super::common::{self, Evidence, Job, Kill, Outcome, Rounds, Schedule, Weir};
use super::{late_diff, late_of_dir, late_rows, output_of, published_rows, row_diff};
use std::path::Path;

/// Kills per run of the test unless `WEIR_CRASH_KILLS` says otherwise.
const DEFAULT_KILLS: u64 = 10;

/// The fail points asked for first, each once, then at random.
const POINTS: [&str; 5] = [
    "file-mid-merge",
    "file-after-merge",
    "after-manifest",
    "mid-commit",
    "mid-recovery-commit",
];

/// The harness's job in `dir`, its sinks compacting into files of 128 KiB (an epoch writes 8
/// to 50 KiB per subtask, so merges come every few epochs, at the final one and at restores).
fn compacting_job(dir: &Path, input: &Path) -> Job {
    let job = super::file_job(dir, input);
    let sql = std::fs::read_to_string(&job.script).expect("the job's SQL");
    let sql = sql.replace(
        "'format' = 'parquet')",
        "'format' = 'parquet',\n\x20 'auto-compaction' = 'true', 'compaction.file-size' = '128KB')",
    );
    assert_eq!(sql.matches("'auto-compaction'").count(), 2, "{sql}");
    Job::create(dir, &sql)
}

/// The published Parquet files of `dir`: (all, merged ones).
fn file_counts(dir: &Path) -> (usize, usize) {
    let names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("part-"))
                .collect()
        })
        .unwrap_or_default();
    let merged = names.iter().filter(|n| n.contains("-m")).count();
    (names.len(), merged)
}

#[test]
fn with_auto_compaction_killed_runs_publish_exactly_the_output_of_a_run_that_never_failed() {
    let kills_wanted = common::env_u64("WEIR_CRASH_KILLS").unwrap_or(DEFAULT_KILLS);
    let seed = common::env_u64("WEIR_CRASH_SEED").unwrap_or_else(common::clock_seed);
    println!(
        "compaction crash harness: seed {seed} (set WEIR_CRASH_SEED={seed} to repeat the schedule)"
    );
    let evidence = Evidence::new();
    let work = evidence.path();
    let input = work.join("in");
    let (reference, late_reference) = super::write_input(&input);

    // The reference: the job without compaction, never killed.
    let plain = super::file_job(&work.join("plain"), &input);
    finish(&plain, "the run without compaction");
    let golden = published_rows(&output_of(&plain));
    let golden_late = late_rows(&plain);
    assert!(row_diff(&reference, &golden).is_none());
    assert!(late_diff(&late_reference, &golden_late).is_none());

    // With compaction, never killed: the same rows in fewer files.
    let compacted = compacting_job(&work.join("compacted"), &input);
    finish(&compacted, "the run with compaction");
    check(
        &compacted,
        &golden,
        &golden_late,
        "the run with compaction without kills",
    );
    let (plain_files, _) = file_counts(&output_of(&plain));
    let (files, merged) = file_counts(&output_of(&compacted));
    println!(
        "compaction crash harness: {plain_files} files without compaction, {files} with \
         ({merged} merged)"
    );
    assert!(
        merged > 0 && files < plain_files,
        "{files} files, {merged} merged"
    );

    let mut rounds = Rounds::new(seed, kills_wanted, Schedule::covering(seed, &POINTS));
    while rounds.tally.kills() < kills_wanted {
        let round = rounds.done + 1;
        let job = compacting_job(&work.join(format!("round-{round}")), &input);
        rounds.run(&job, &|job| format!(", {}", job.restored_from()));
        check(
            &job,
            &golden,
            &golden_late,
            &format!(
                "round {round} (seed {seed}), kill sequence:\n{}\n",
                rounds.log.join("\n")
            ),
        );
        println!(
            "compaction crash harness: round {round} matches ({} kills so far)",
            rounds.tally.kills()
        );
        std::fs::remove_dir_all(&job.dir).expect("remove the round's directory");
    }
    rounds.assert_every_fail_point_reached(DEFAULT_KILLS);
    println!(
        "compaction crash harness: fail points reached {:?}, {} rounds",
        rounds.tally.reached, rounds.done
    );
}

/// Runs `job` to its end without kills.
fn finish(job: &Job, what: &str) {
    let mut run = Weir::spawn(job, false, None);
    match run.drive(&Kill::Never) {
        Outcome::Finished => {}
        other => panic!("{what} did not finish: {other}\n{}", run.stderr()),
    }
}

/// Fails unless `job` published exactly the reference rows and late rows, and left nothing
/// staged behind.
fn check(job: &Job, golden: &[super::Row], golden_late: &[super::LateRow], what: &str) {
    if let Some(diff) = row_diff(golden, &published_rows(&output_of(job))) {
        panic!("{what} published other rows than the run without compaction:\n{diff}");
    }
    if let Some(diff) = late_diff(golden_late, &late_rows(job)) {
        panic!("{what} routed other late rows than the run without compaction:\n{diff}");
    }
    for dir in [output_of(job), late_of_dir(&job.dir)] {
        let staged = files_below(&dir.join("_staging"));
        assert_eq!(
            staged,
            0,
            "{what}: {staged} files left in {}",
            dir.display()
        );
    }
}

/// Files below `dir`, recursively (none when it does not exist).
fn files_below(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(|e| e.ok())
        .map(|e| {
            let path = e.path();
            if path.is_dir() { files_below(&path) } else { 1 }
        })
        .sum()
}
