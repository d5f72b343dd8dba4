//! One answer whatever the split size, the parallelism or the timing: windowed SQL over a file
//! with late and out-of-order rows (several percent, some a minute behind, some across split
//! boundaries) gives byte-identical output, late rows and dropped counts at parallelism 1, 2 and
//! 4 and with splits of the whole file, 1 MiB, 64 KiB and the default, for CSV, JSON lines and
//! Parquet; and the tumbling result equals a sequential reference computed here, reading the
//! file from its first row to its last.

use crate::support::{Rng, format_rows, read_parquet_dir};
use arrow::array::{ArrayRef, Int64Array, RecordBatch};
use parquet::file::properties::WriterProperties;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use weir::Engine;

/// Bids in the test file.
const ROWS: usize = 60_000;
/// Event time advances 20 ms per row on average: 1,200 s of event time in all.
const STEP_MS: i64 = 20;
/// The first event time.
const BASE_MS: i64 = 1_700_000_000_000;
/// Auctions the bids spread over.
const AUCTIONS: u64 = 40;

/// Tumbling results by `(auction, window end)`: count, sum and max of the price.
type Windows = BTreeMap<(i64, i64), (i64, i64, i64)>;

/// One bid: `(auction, price, ts)`, in file order.
pub(crate) type Bid = (i64, i64, i64);

/// The bids: in order up to 3 s out of order, and 6% late by 10 to 60 s (the kind of data a
/// real feed has).
pub(crate) fn bids() -> Vec<Bid> {
    let mut rng = Rng(25);
    (0..ROWS)
        .map(|i| {
            let on_time = BASE_MS + i as i64 * STEP_MS - rng.below(3_000) as i64;
            let ts = if rng.below(100) < 6 {
                on_time - 10_000 - rng.below(50_000) as i64
            } else {
                on_time
            };
            (rng.below(AUCTIONS) as i64, 1 + rng.below(10_000) as i64, ts)
        })
        .collect()
}

/// The bids as a CSV file's text.
pub(crate) fn csv_text(bids: &[Bid]) -> String {
    let mut csv = String::from("auction,price,ts\n");
    for (a, p, t) in bids {
        csv.push_str(&format!("{a},{p},{t}\n"));
    }
    csv
}

fn write_inputs(dir: &Path, bids: &[Bid]) {
    let mut json = String::new();
    for (a, p, t) in bids {
        json.push_str(&format!("{{\"auction\":{a},\"price\":{p},\"ts\":{t}}}\n"));
    }
    std::fs::write(dir.join("bids.csv"), csv_text(bids)).expect("write csv");
    std::fs::write(dir.join("bids.json"), json).expect("write json");
    let column = |f: fn(&Bid) -> i64| Arc::new(Int64Array::from_iter_values(bids.iter().map(f)));
    let batch = RecordBatch::try_from_iter([
        ("auction", column(|b| b.0) as ArrayRef),
        ("price", column(|b| b.1) as ArrayRef),
        ("ts", column(|b| b.2) as ArrayRef),
    ])
    .expect("batch");
    // Row groups of 2,000 rows: about 30 of them, so small split sizes cut the file often.
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(2_000))
        .build();
    let file = std::fs::File::create(dir.join("bids.parquet")).expect("create parquet");
    let mut writer =
        parquet::arrow::ArrowWriter::try_new(file, batch.schema(), Some(props)).expect("writer");
    writer.write(&batch).expect("write parquet");
    writer.close().expect("close parquet");
}

/// What one run gave: every output row and late row (sorted), and the rows dropped as late.
#[derive(Debug)]
struct Answer {
    tumble: Vec<String>,
    session: Vec<String>,
    late: Vec<String>,
    dropped: u64,
    /// Where the run wrote (kept until the answer is dropped).
    dir: std::path::PathBuf,
    _out: tempfile::TempDir,
}

impl PartialEq for Answer {
    fn eq(&self, other: &Self) -> bool {
        (&self.tumble, &self.session, &self.late, self.dropped)
            == (&other.tumble, &other.session, &other.late, other.dropped)
    }
}

/// The job: a 10 s tumbling COUNT/SUM/MAX per auction whose late rows are routed to a table,
/// over one source with the watermark `ts - 5 s`, reading `{input}/bids.{format}` and writing
/// under `output` (directories or the goldens' `$__TEST_DIR__`).
pub(crate) fn tumble_job(input: &str, output: &str, format: &str, split: Option<&str>) -> String {
    let split = split.map_or(String::new(), |s| format!(", 'split-size' = '{s}'"));
    format!(
        "CREATE TABLE bids (auction BIGINT NOT NULL, price BIGINT NOT NULL, ts BIGINT NOT NULL,\n\
           WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)\n\
           WITH ('connector' = 'filesystem', 'path' = '{input}/bids.{format}',\n\
           'format' = '{format}', 'batch-size' = '1000'{split});\n{}",
        tumble_query(output)
    )
}

/// The tumbling query over a table `bids (auction, price, ts)` with a watermark: COUNT/SUM/MAX
/// per auction and 10 s window into `{output}/tumble`, late rows routed to `{output}/late`.
pub(crate) fn tumble_query(output: &str) -> String {
    format!(
        "SET 'late.policy' = 'route';\n\
         SET 'late.sink' = 'late_rows';\n\
         CREATE TABLE tumble_out (auction BIGINT, window_end TIMESTAMP(3), n BIGINT,\n\
           total BIGINT, top BIGINT)\n\
           WITH ('connector' = 'filesystem', 'path' = '{output}/tumble', 'format' = 'parquet');\n\
         CREATE TABLE late_rows (auction BIGINT, price BIGINT, ts BIGINT,\n\
           __weir_late_reason STRING)\n\
           WITH ('connector' = 'filesystem', 'path' = '{output}/late', 'format' = 'parquet');\n\
         INSERT INTO tumble_out\n\
         SELECT auction, window_end, COUNT(*), SUM(price), MAX(price)\n\
         FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND))\n\
         GROUP BY auction, window_start, window_end;\n"
    )
}

/// The session job over the same source: 4 s sessions per auction, late rows dropped.
fn session_job(input: &str, output: &str, format: &str, split: Option<&str>) -> String {
    let split = split.map_or(String::new(), |s| format!(", 'split-size' = '{s}'"));
    format!(
        "CREATE TABLE bids (auction BIGINT NOT NULL, price BIGINT NOT NULL, ts BIGINT NOT NULL,\n\
           WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)\n\
           WITH ('connector' = 'filesystem', 'path' = '{input}/bids.{format}',\n\
           'format' = '{format}', 'batch-size' = '1000'{split});\n\
         CREATE TABLE session_out (auction BIGINT, window_start TIMESTAMP(3),\n\
           window_end TIMESTAMP(3), n BIGINT, total BIGINT)\n\
           WITH ('connector' = 'filesystem', 'path' = '{output}/session', 'format' = 'parquet');\n\
         INSERT INTO session_out\n\
         SELECT auction, window_start, window_end, COUNT(*), SUM(price)\n\
         FROM TABLE(SESSION(TABLE bids PARTITION BY auction, DESCRIPTOR(ts),\n\
           INTERVAL '4' SECOND))\n\
         GROUP BY auction, window_start, window_end;\n"
    )
}

/// Runs a script and returns the rows dropped as late.
async fn run(sql: &str, name: &str) -> u64 {
    let engine = Engine::new();
    let job = engine.compile_sql(sql, name).await.expect("compiles");
    let summary = engine.run(&job.spec, Some(name)).await.expect("runs");
    summary.metrics.operators.iter().map(|o| o.dropped).sum()
}

fn sorted_rows(dir: &Path) -> Vec<String> {
    format_rows(&read_parquet_dir(dir))
}

async fn answer(dir: &Path, format: &str, split: Option<&str>, parallelism: u32) -> Answer {
    let out = tempfile::tempdir().expect("tempdir");
    let (input, output) = (dir.display().to_string(), out.path().display().to_string());
    let at = format!("SET 'parallelism' = '{parallelism}';\n");
    let tumble = at.clone() + &tumble_job(&input, &output, format, split);
    let routed_dropped = run(&tumble, "tumble.sql").await;
    assert_eq!(routed_dropped, 0, "routed rows are not dropped");
    let session = at + &session_job(&input, &output, format, split);
    let dropped = run(&session, "session.sql").await;
    Answer {
        tumble: sorted_rows(&out.path().join("tumble")),
        session: sorted_rows(&out.path().join("session")),
        late: sorted_rows(&out.path().join("late")),
        dropped,
        dir: out.path().to_path_buf(),
        _out: out,
    }
}

/// The tumbling result read sequentially, as Flink reads one file: each row is late exactly
/// when its window ended at or before the watermark emitted before it (`max - 5 s`, Weir's
/// `max - ooo - 1` with ooo 4,999 ms, emitted when it advanced by at least 200 ms).
fn sequential_tumble(bids: &[Bid]) -> (Windows, usize) {
    let mut windows: BTreeMap<(i64, i64), (i64, i64, i64)> = BTreeMap::new();
    let mut emitted: Option<i64> = None;
    let mut max: Option<i64> = None;
    let mut late = 0;
    for &(auction, price, ts) in bids {
        let end = ts - ts.rem_euclid(10_000) + 10_000;
        if emitted.is_some_and(|w| end - 1 <= w) {
            late += 1;
        } else {
            let w = windows.entry((auction, end)).or_insert((0, 0, i64::MIN));
            w.0 += 1;
            w.1 += price;
            w.2 = w.2.max(price);
        }
        if max.is_none_or(|m| ts > m) {
            max = Some(ts);
            let candidate = ts - 5_000;
            if emitted.is_none_or(|w| candidate >= w + 200) {
                emitted = Some(candidate);
            }
        }
    }
    (windows, late)
}

/// The full tier (docs/testing.md): three formats at four split sizes and several parallelisms
/// take over half a minute.
mod full {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn late_rows_and_results_do_not_depend_on_split_size_or_parallelism() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bids = bids();
        write_inputs(dir.path(), &bids);
        let (reference, late) = sequential_tumble(&bids);
        assert!(
            late > ROWS / 50,
            "the data has several percent late rows: {late}"
        );
        for format in ["csv", "json", "parquet"] {
            // Parquet splits gather row groups, so smaller sizes cut it into more splits.
            let sizes: &[Option<&str>] = if format == "parquet" {
                &[Some("0"), Some("65536"), Some("16384"), None]
            } else {
                &[Some("0"), Some("1048576"), Some("65536"), None]
            };
            let first = answer(dir.path(), format, sizes[0], 1).await;
            assert_eq!(
                first.late.len(),
                late,
                "{format}: late rows as read in order"
            );
            assert_eq!(
                first.tumble.len(),
                reference.len(),
                "{format}: the windows of the sequential reference"
            );
            let expected = reference_rows(&reference, &read_parquet_dir(&first.dir.join("tumble")));
            assert_eq!(first.tumble, expected, "{format}: the sequential reference");
            for parallelism in [1, 2, 4] {
                for &size in sizes {
                    let again = answer(dir.path(), format, size, parallelism).await;
                    assert!(
                        again == first,
                        "{format} at parallelism {parallelism}, split size {size:?}: {} tumble rows \
                         (expected {}), {} late rows ({}), {} session rows ({}), {} dropped ({})",
                        again.tumble.len(),
                        first.tumble.len(),
                        again.late.len(),
                        first.late.len(),
                        again.session.len(),
                        first.session.len(),
                        again.dropped,
                        first.dropped,
                    );
                }
            }
        }
    }
}

/// The tumbling reference over several streams, each read in order by itself (rows late
/// against their own stream's watermark; the streams hold different auctions), as rows
/// formatted like the output in `output_dir`, and the number of late rows.
pub(crate) fn sequential_tumble_rows(
    streams: impl IntoIterator<Item = Vec<Bid>>,
    output_dir: &Path,
) -> (Vec<String>, usize) {
    let mut windows = BTreeMap::new();
    let mut late = 0;
    for stream in streams {
        let (w, l) = sequential_tumble(&stream);
        for (key, value) in w {
            assert!(
                windows.insert(key, value).is_none(),
                "an auction in two streams"
            );
        }
        late += l;
    }
    let output = crate::support::read_published_parts(output_dir);
    (reference_rows(&windows, &output), late)
}

/// The reference's windows as rows formatted like `output`'s (its column types).
fn reference_rows(reference: &Windows, output: &[RecordBatch]) -> Vec<String> {
    let schema = output.first().expect("tumble output").schema();
    let column = |i: usize| -> ArrayRef {
        Arc::new(Int64Array::from_iter_values(reference.iter().map(
            |(&(auction, end), &(n, total, top))| [auction, end, n, total, top][i],
        )))
    };
    let columns: Vec<ArrayRef> = (0..5).map(column).collect();
    let columns: Vec<ArrayRef> = columns
        .iter()
        .zip(schema.fields())
        .map(|(c, f)| arrow::compute::cast(c, f.data_type()).expect("cast"))
        .collect();
    format_rows(&[RecordBatch::try_new(schema, columns).expect("reference batch")])
}
