//! The proof of recovery with keyed state in Redis: the joins harness's job (interval join,
//! deduplication, OVER, window Top-N, cascading windows over the crash harness's bids) with
//! `SET 'state.backend' = 'redis'`, on a real `redis-server` the test starts and stops by PID.
//!
//! 1. A run without kills on Redis publishes exactly what the same job publishes on redb.
//! 2. Rounds of `weir run` killed with SIGKILL (random moments and fail points) and restored
//!    with `--restore latest` publish exactly that too.
//! 3. The Redis server is restarted mid-run (its data gone): the job fails on the lost
//!    connection, restarts by itself from its latest checkpoint (its `restart` policy), and
//!    what it published is still exactly that.

use super::common::{self, Diff, Evidence, Job, Kill, Outcome, Rounds, Schedule, Weir};
use super::joins::{TABLES, job_with, published};
use std::time::{Duration, Instant};
use weir_testkit::redis::RedisServer;

/// Kills per run of the test unless `WEIR_CRASH_KILLS` says otherwise.
const DEFAULT_KILLS: u64 = 6;

/// How long the run may take to make its first checkpoint durable before Redis is restarted.
const FIRST_CHECKPOINT: Duration = Duration::from_secs(60);

#[test]
fn with_state_in_redis_killed_runs_and_a_redis_restart_publish_exactly_the_output_of_a_run_that_never_failed()
 {
    // Without a server the test fails with the kit's message: it was not run.
    let mut server = RedisServer::start().unwrap_or_else(|e| panic!("{e}"));
    let kills_wanted = common::env_u64("WEIR_CRASH_KILLS").unwrap_or(DEFAULT_KILLS);
    let seed = common::env_u64("WEIR_CRASH_SEED").unwrap_or_else(common::clock_seed);
    println!(
        "redis crash harness: seed {seed} (set WEIR_CRASH_SEED={seed} to repeat the schedule)"
    );
    let evidence = Evidence::new();
    let work = evidence.path();
    let input = work.join("in");
    super::write_input(&input);
    let on_redis = format!(
        "SET 'state.backend' = 'redis';\n\
         SET 'state.redis.url' = '{}';\n\
         SET 'restart.attempts' = '5';\n\
         SET 'restart.delay' = '200ms';\n",
        server.url()
    );

    // The reference: the job on redb, never killed.
    let golden_job = job_with(&work.join("golden"), &input, "");
    finish(&golden_job, "the run on redb without kills");
    let golden: Vec<Vec<Vec<i64>>> = TABLES
        .iter()
        .map(|table| published(&golden_job, table))
        .collect();
    let compare = |job: &Job, what: &str| {
        for (table, expected) in TABLES.iter().zip(&golden) {
            let actual = published(job, table);
            if let Some(diff) = Diff::of(expected, &actual, "the table's columns") {
                panic!(
                    "{what} (seed {seed}) published other rows to `{}` than the run on redb \
                     without kills:\n{diff}",
                    table.0
                );
            }
        }
    };

    // 1. On Redis, never killed.
    let started = Instant::now();
    let fresh = job_with(&work.join("fresh"), &input, &on_redis);
    finish(&fresh, "the run on Redis without kills");
    compare(&fresh, "the run on Redis without kills");
    let keys = server.command(&["DBSIZE"]).expect("DBSIZE");
    println!(
        "redis crash harness: the run on Redis took {:.1} s and left {} in Redis",
        started.elapsed().as_secs_f64(),
        keys.trim()
    );

    // 2. Killed and restored.
    let mut rounds = Rounds::new(seed, kills_wanted, Schedule::new(seed));
    while rounds.tally.kills() < kills_wanted {
        let round = rounds.done + 1;
        let job = job_with(&work.join(format!("round-{round}")), &input, &on_redis);
        rounds.run(&job, &|job| format!(", {}", job.restored_from()));
        compare(&job, &format!("round {round} on Redis"));
        println!(
            "redis crash harness: round {round} matches ({} kills so far)",
            rounds.tally.kills()
        );
        std::fs::remove_dir_all(&job.dir).expect("remove the round's directory");
    }

    // 3. Redis restarted (empty) once a checkpoint is durable.
    let job = job_with(&work.join("redis-restart"), &input, &on_redis);
    let mut weir = Weir::spawn(&job, false, None);
    let waited = Instant::now();
    while common::files_named(&job.checkpoints, "manifest.json") == 0 {
        assert!(
            !weir.has_exited() && waited.elapsed() < FIRST_CHECKPOINT,
            "no durable checkpoint before the job ended or in {FIRST_CHECKPOINT:?}\n{}",
            weir.stderr()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    server.restart().expect("restart Redis");
    match weir.drive(&Kill::Never) {
        Outcome::Finished => {}
        other => panic!(
            "the run whose Redis restarted did not finish: {other}\n{}",
            weir.stderr()
        ),
    }
    // The lost connection failed the job, and its restart policy restored it.
    let stderr = weir.stderr();
    assert!(
        stderr.contains("restarting from its latest checkpoint") && stderr.contains("Redis"),
        "the job did not fail and restart when Redis restarted:\n{stderr}"
    );
    compare(&job, "the run whose Redis restarted mid-run");
    println!(
        "redis crash harness: {} kills ({} at fail points, {} at random moments), {} rounds, \
         one Redis restart",
        rounds.tally.kills(),
        rounds.tally.at_fail_points,
        rounds.tally.at_random,
        rounds.done
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
