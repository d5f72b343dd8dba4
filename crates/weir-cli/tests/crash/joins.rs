//! The proof of recovery for the operators that keep rows in keyed state until the watermark
//! passes them: the crash harness's bids (the same files, late rows and all) through one SQL
//! job with an interval join, a first-row deduplication, an OVER aggregation, a window Top-N
//! and windows cascading over a window aggregation's `window_time`, each into Parquet files of
//! its own. `weir run` is killed with SIGKILL at random moments and at named fail points and
//! restored until its input is done; every table must then hold exactly the rows of a run that
//! never failed, as multisets, and the run that ended must have dropped the same late rows.
//! What each query computes is proven against references elsewhere (tests/engine); here only
//! that a kill and a restore lose and repeat nothing.

use super::common::{self, Diff, Evidence, Job, Kill, Outcome, Rounds, Schedule, Weir};
use std::path::Path;
use std::time::Instant;

/// Kills per run of the test unless `WEIR_CRASH_KILLS` says otherwise: fewer than the window
/// job's, as each round runs five queries.
const DEFAULT_KILLS: u64 = 8;

/// The tables of the job, each with its number of (integer or timestamp) columns.
pub(super) const TABLES: [(&str, usize); 5] = [
    ("pairs", 5),
    ("firsts", 3),
    ("running", 5),
    ("top", 4),
    ("cascade", 3),
];

#[test]
fn killed_and_restored_joins_dedup_over_and_top_n_publish_exactly_the_output_of_a_run_that_never_failed()
 {
    let kills_wanted = common::env_u64("WEIR_CRASH_KILLS").unwrap_or(DEFAULT_KILLS);
    let seed = common::env_u64("WEIR_CRASH_SEED").unwrap_or_else(common::clock_seed);
    println!(
        "joins crash harness: seed {seed} (set WEIR_CRASH_SEED={seed} to repeat the schedule)"
    );
    let evidence = Evidence::new();
    let work = evidence.path();
    let input = work.join("in");
    super::write_input(&input);

    let golden_job = job(&work.join("golden"), &input);
    let started = Instant::now();
    let mut golden_run = Weir::spawn(&golden_job, false, None);
    match golden_run.drive(&Kill::Never) {
        Outcome::Finished => {}
        other => panic!(
            "the run without kills did not finish: {other}\n{}",
            golden_run.stderr()
        ),
    }
    let golden: Vec<Vec<Vec<i64>>> = TABLES
        .iter()
        .map(|table| published(&golden_job, table))
        .collect();
    let golden_dropped = super::dropped_late(&golden_job);
    println!(
        "joins crash harness: golden run took {:.1} s; rows per table {:?}; {golden_dropped} \
         late rows dropped",
        started.elapsed().as_secs_f64(),
        golden.iter().map(Vec::len).collect::<Vec<_>>()
    );
    for (table, rows) in TABLES.iter().zip(&golden) {
        assert!(
            !rows.is_empty(),
            "the run without kills wrote no row to `{}`",
            table.0
        );
    }
    assert!(
        golden_dropped > 0,
        "the input's late rows are dropped by the joins, the deduplication and the windows"
    );
    assert!(
        common::files_named(&golden_job.checkpoints, "manifest.json") > 0,
        "the run without kills left no checkpoint manifest"
    );

    let mut rounds = Rounds::new(seed, kills_wanted, Schedule::new(seed));
    while rounds.tally.kills() < kills_wanted {
        let round = rounds.done + 1;
        let job = job(&work.join(format!("round-{round}")), &input);
        rounds.run(&job, &|job| {
            format!(
                ", {}, {} rows dropped as late",
                job.restored_from(),
                super::dropped_late(job)
            )
        });
        for (table, expected) in TABLES.iter().zip(&golden) {
            let actual = published(&job, table);
            if let Some(diff) = Diff::of(expected, &actual, "the table's columns") {
                panic!(
                    "round {round} (seed {seed}) published other rows to `{}` than the run \
                     without kills:\n{diff}\nkill sequence:\n{}",
                    table.0,
                    rounds.log.join("\n")
                );
            }
        }
        // The run that ended restored the state of the runs before it: the late rows it
        // dropped are counted again from its checkpoint's input position, so only a run that
        // started fresh has the golden count; none may drop more.
        let dropped = super::dropped_late(&job);
        assert!(
            dropped <= golden_dropped,
            "round {round} (seed {seed}): the run that ended dropped {dropped} late rows, more \
             than the {golden_dropped} of the run without kills\nkill sequence:\n{}",
            rounds.log.join("\n")
        );
        println!(
            "joins crash harness: round {round} matches the golden output ({} kills so far)",
            rounds.tally.kills()
        );
        std::fs::remove_dir_all(&job.dir).expect("remove the round's directory");
    }
    rounds.assert_every_fail_point_reached(super::DEFAULT_KILLS);
    println!(
        "joins crash harness: {} kills ({} at fail points, {} at random moments), {} rounds",
        rounds.tally.kills(),
        rounds.tally.at_fail_points,
        rounds.tally.at_random,
        rounds.done
    );
}

/// The job of a round (or of the run without kills) in `dir`, over the bids in `input`.
fn job(dir: &Path, input: &Path) -> Job {
    job_with(dir, input, "")
}

/// [`job`] with more `SET` statements in front (`settings`, each ending in a line feed).
pub(super) fn job_with(dir: &Path, input: &Path, settings: &str) -> Job {
    let out = |table: &str| dir.join(table).display().to_string();
    let sql = format!(
        "{settings}SET 'parallelism' = '2';\n\
         SET 'checkpoint.interval' = '150ms';\n\
         CREATE TABLE bids (\n\
         \x20 auction BIGINT NOT NULL,\n\
         \x20 price BIGINT NOT NULL,\n\
         \x20 date_time BIGINT NOT NULL,\n\
         \x20 ts AS TO_TIMESTAMP_MILLIS(date_time),\n\
         \x20 WATERMARK FOR ts AS ts - INTERVAL '1' SECOND\n\
         ) WITH ('connector' = 'filesystem', 'path' = '{input}/bids-*.csv', 'format' = 'csv');\n\
         CREATE TABLE pairs (auction BIGINT, a_time BIGINT, a_price BIGINT, b_time BIGINT,\n\
         \x20 b_price BIGINT) WITH ('connector' = 'filesystem', 'path' = '{pairs}',\n\
         \x20 'format' = 'parquet');\n\
         CREATE TABLE firsts (price BIGINT, auction BIGINT, date_time BIGINT)\n\
         \x20 WITH ('connector' = 'filesystem', 'path' = '{firsts}', 'format' = 'parquet');\n\
         CREATE TABLE running (auction BIGINT, date_time BIGINT, price BIGINT, n BIGINT,\n\
         \x20 total BIGINT) WITH ('connector' = 'filesystem', 'path' = '{running}',\n\
         \x20 'format' = 'parquet');\n\
         CREATE TABLE top (window_start TIMESTAMP(3), auction BIGINT, total BIGINT, rn BIGINT)\n\
         \x20 WITH ('connector' = 'filesystem', 'path' = '{top}', 'format' = 'parquet');\n\
         CREATE TABLE cascade (window_start TIMESTAMP(3), window_end TIMESTAMP(3), bids BIGINT)\n\
         \x20 WITH ('connector' = 'filesystem', 'path' = '{cascade}', 'format' = 'parquet');\n\
         CREATE VIEW per_second AS\n\
         SELECT auction, window_time AS rowtime, COUNT(*) AS bids\n\
         FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '1' SECOND))\n\
         GROUP BY auction, window_start, window_end, window_time;\n\
         INSERT INTO pairs\n\
         SELECT a.auction, a.date_time, a.price, b.date_time, b.price\n\
         FROM bids a JOIN bids b\n\
         \x20 ON a.auction = b.auction AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '1' SECOND\n\
         WHERE a.price > 4900 AND b.price < 100;\n\
         INSERT INTO firsts\n\
         SELECT price, auction, date_time FROM (\n\
         \x20 SELECT *, ROW_NUMBER() OVER (PARTITION BY price ORDER BY ts) AS rn FROM bids)\n\
         WHERE rn = 1;\n\
         INSERT INTO running\n\
         SELECT auction, date_time, price,\n\
         \x20 COUNT(*) OVER (PARTITION BY auction ORDER BY ts\n\
         \x20   ROWS BETWEEN 3 PRECEDING AND CURRENT ROW),\n\
         \x20 SUM(price) OVER (PARTITION BY auction ORDER BY ts\n\
         \x20   ROWS BETWEEN 3 PRECEDING AND CURRENT ROW)\n\
         FROM bids WHERE price > 4950;\n\
         INSERT INTO top\n\
         SELECT window_start, auction, total, rn FROM (\n\
         \x20 SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end\n\
         \x20   ORDER BY total DESC) AS rn FROM (\n\
         \x20   SELECT auction, window_start, window_end, SUM(price) AS total\n\
         \x20   FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '1' SECOND))\n\
         \x20   GROUP BY auction, window_start, window_end))\n\
         WHERE rn <= 3;\n\
         INSERT INTO cascade\n\
         SELECT window_start, window_end, SUM(bids)\n\
         FROM TABLE(TUMBLE(TABLE per_second, DESCRIPTOR(rowtime), INTERVAL '10' SECOND))\n\
         GROUP BY window_start, window_end;\n",
        input = input.display(),
        pairs = out("pairs"),
        firsts = out("firsts"),
        running = out("running"),
        top = out("top"),
        cascade = out("cascade"),
    );
    Job::create(dir, &sql)
}

/// The rows `job` published to `table`, sorted, as vectors (the tables' widths differ).
pub(super) fn published(job: &Job, (table, columns): &(&str, usize)) -> Vec<Vec<i64>> {
    let dir = job.dir.join(table);
    let mut rows: Vec<Vec<i64>> = match columns {
        3 => rows_of::<3>(&dir),
        4 => rows_of::<4>(&dir),
        5 => rows_of::<5>(&dir),
        other => panic!("no table of the job has {other} columns"),
    };
    rows.sort_unstable();
    rows
}

fn rows_of<const N: usize>(dir: &Path) -> Vec<Vec<i64>> {
    common::published_parquet_rows::<N>(dir)
        .into_iter()
        .map(Vec::from)
        .collect()
}
