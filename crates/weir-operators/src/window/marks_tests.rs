//! A batch with watermark marks gives a window exactly what its pieces give: the same results
//! and the same late rows, for every window kind and late policy, wherever the marks fall.

use super::tests::{Collected, Step, nullable_batch, options, run};
use proptest::prelude::*;
use weir_api::{EventTimeMs, Piece, Watermark, WatermarkMarks};

/// Rows `(ts, key, value)` in arrival order, and after which rows the watermark advances.
#[derive(Debug, Clone)]
struct Feed {
    rows: Vec<(i64, usize, i64)>,
    /// Rows `0..cut` are followed by the watermark `max(ts of rows 0..cut) - 20`.
    cuts: Vec<usize>,
    /// Batches are cut every `batch` rows.
    batch: usize,
    /// Whether the marks also carry a split watermark, `max(ts of rows 0..cut) - 10` after
    /// each cut: ahead of the watermark, as a split's own can be (`lateness: split`).
    split: bool,
}

fn feed() -> impl Strategy<Value = Feed> {
    let shape = (
        1_usize..300,
        1_usize..40,
        1_usize..120,
        any::<u64>(),
        any::<bool>(),
    );
    shape.prop_map(|(n, every, batch, seed, split)| {
        let mut state = seed | 1;
        let mut next = move |m: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % m) as i64
        };
        let rows = (0..n)
            .map(|i| {
                let ts = 3 * i as i64 + next(10);
                // One row in eight is 30 to 200 behind the others: late or nearly.
                let ts = if next(8) == 0 {
                    ts - 30 - next(170)
                } else {
                    ts
                };
                (ts, next(4) as usize, next(100))
            })
            .collect();
        let cuts = (1..=n)
            .filter(|i| i % every == 0 || next(10) == 0)
            .collect();
        Feed {
            rows,
            cuts,
            batch,
            split,
        }
    })
}

/// The watermark after rows `0..cut`.
fn watermark_after(rows: &[(i64, usize, i64)], cut: usize) -> i64 {
    rows[..cut].iter().map(|r| r.0).max().unwrap_or(i64::MIN) - 20
}

fn rows_batch(rows: &[(i64, usize, i64)]) -> arrow::array::RecordBatch {
    const KEYS: [&str; 4] = ["a", "b", "c", "d"];
    let rows: Vec<_> = rows
        .iter()
        .map(|&(t, k, v)| (Some(t), KEYS[k], Some(v)))
        .collect();
    nullable_batch(&rows)
}

/// The feed as whole batches with the advances inside them as marks.
fn marked(f: &Feed) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut last = i64::MIN;
    for (i, b) in f.rows.chunks(f.batch).enumerate() {
        let first = i * f.batch;
        let mut marks = WatermarkMarks::new();
        for &cut in f
            .cuts
            .iter()
            .filter(|&&c| c > first && c <= first + b.len())
        {
            let w = watermark_after(&f.rows, cut);
            if w > last {
                marks.push(cut - first, Watermark(EventTimeMs(w)));
                last = w;
            }
            if f.split {
                marks.push_split(cut - first, Watermark(EventTimeMs(w + 10)));
            }
        }
        steps.push(Step::Marked(rows_batch(b), marks));
    }
    steps.push(Step::Wm(i64::MAX));
    steps
}

/// The same steps with each batch with marks cut into its pieces: what the batch means, and
/// what a window got before marks.
fn pieces(steps: &[Step]) -> Vec<Step> {
    steps
        .iter()
        .flat_map(|s| match s {
            Step::Marked(b, marks) => marks
                .pieces(b)
                .into_iter()
                .map(|p| match p {
                    Piece::Rows(r) => Step::Rows(r),
                    Piece::Watermark(w) => Step::Wm(w.0.0),
                    Piece::SplitWatermark(w) => Step::SplitWm(w.0.0),
                })
                .collect(),
            s => vec![s.clone()],
        })
        .collect()
}

fn sorted(mut c: Collected) -> Collected {
    c.results.sort();
    c.late.sort();
    c.watermarks = c.watermarks.last().copied().into_iter().collect();
    c
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn a_batch_with_marks_gives_what_its_pieces_give(f in feed()) {
        for window in [
            serde_json::json!({"type": "tumble", "size": 50}),
            serde_json::json!({"type": "hop", "size": 50, "slide": 20}),
            serde_json::json!({"type": "session", "gap": 15}),
        ] {
            for late in [
                serde_json::json!({"policy": "drop"}),
                serde_json::json!({"policy": "route"}),
                serde_json::json!({"policy": "update", "allowed_lateness": 40}),
            ] {
                let opts = options(window.clone(), late.clone());
                let steps = marked(&f);
                let want = run(&opts, &pieces(&steps));
                let got = run(&opts, &steps);
                prop_assert_eq!(sorted(got), sorted(want), "{} {}", window, late);
            }
        }
    }
}
