//! Window operator tests on hand-made inputs: every window kind, boundaries, negative times,
//! nulls, each late policy, type preservation, batch-cut independence and state round trips.

use super::*;
use arrow::array::{
    ArrayRef, AsArray, Float32Array, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray,
};
use arrow::datatypes::{DataType, Field, Float32Type, Float64Type, Int64Type, Schema};
use weir_api::{
    Barrier, Emitted, Epoch, EventTimeMs, JobId, OperatorId, Output, StateRows, SubtaskIndex,
    Watermark,
};

/// The input of most window tests: `ts` (Int64 ms, nullable), `k` (Utf8), `v` (Int64).
pub(super) fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("ts", DataType::Int64, true),
        Field::new("k", DataType::Utf8, false),
        Field::new("v", DataType::Int64, true),
    ]))
}

/// A batch of [`schema`] rows `(ts, k, v)`; `None` is null.
pub(super) fn nullable_batch(rows: &[(Option<i64>, &str, Option<i64>)]) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(
                rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                rows.iter().map(|r| r.1).collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from(
                rows.iter().map(|r| r.2).collect::<Vec<_>>(),
            )),
        ],
    )
    .unwrap()
}

fn batch(rows: &[(Option<i64>, &str, i64)]) -> RecordBatch {
    let rows: Vec<_> = rows.iter().map(|&(t, k, v)| (t, k, Some(v))).collect();
    nullable_batch(&rows)
}

pub(super) fn options(window: serde_json::Value, late: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "time_column": "ts",
        "window": window,
        "key_by": ["k"],
        "aggregates": [
            {"function": "count", "as": "n"},
            {"function": "sum", "column": "v", "as": "total"},
            {"function": "max", "column": "v", "as": "top"},
        ],
        "late": late,
    })
}

fn config(options: &serde_json::Value, input: &Arc<Schema>) -> Arc<WindowConfig> {
    let opts: WindowOptions = serde_json::from_value(options.clone()).unwrap();
    Arc::new(WindowConfig::resolve(&opts, input, "operators[0].options").unwrap())
}

fn ctx() -> TaskContext {
    TaskContext::new(JobId::new("j"), OperatorId::new("w"), SubtaskIndex(0), 1)
}

fn operator(cfg: &Arc<WindowConfig>, ctx: &TaskContext) -> Box<dyn Operator> {
    PreparedWindow {
        cfg: Arc::clone(cfg),
    }
    .create(ctx)
    .unwrap()
}

/// One step of an input: a batch or a watermark.
#[derive(Clone)]
pub(super) enum Step {
    Rows(RecordBatch),
    /// A batch inside which the watermark advances.
    Marked(RecordBatch, weir_api::WatermarkMarks),
    Wm(i64),
    /// The rows after it were read behind this watermark of their own split.
    SplitWm(i64),
}

/// Everything an operator emitted: main results (as rows of strings) and late rows.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct Collected {
    pub(super) results: Vec<Vec<String>>,
    pub(super) late: Vec<Vec<String>>,
    pub(super) watermarks: Vec<i64>,
}

fn rows_of(batch: &RecordBatch) -> Vec<Vec<String>> {
    (0..batch.num_rows())
        .map(|r| {
            batch
                .columns()
                .iter()
                .map(|c| arrow::util::display::array_value_to_string(c, r).unwrap_or_default())
                .collect()
        })
        .collect()
}

fn run_steps(op: &mut dyn Operator, steps: &[Step], into: &mut Collected) {
    for step in steps {
        let mut out = Output::new();
        match step {
            Step::Rows(b) => op.process_batch(0, b.clone(), &mut out).unwrap(),
            Step::Marked(b, marks) => op
                .process_marked_batch(0, b.clone(), marks, &mut out)
                .unwrap(),
            Step::Wm(w) => op
                .process_watermark(Watermark(EventTimeMs(*w)), &mut out)
                .unwrap(),
            Step::SplitWm(w) => op
                .process_split_watermark(0, Watermark(EventTimeMs(*w)), &mut out)
                .unwrap(),
        }
        for e in out.drain() {
            match e {
                Emitted::Data { port: 0, batch } => into.results.extend(rows_of(&batch)),
                Emitted::Data { batch, .. } => into.late.extend(rows_of(&batch)),
                Emitted::Watermark(w) => into.watermarks.push(w.0.0),
                Emitted::SplitWatermark(w) => {
                    panic!("a window forwarded split watermark {w:?}: its rows are results")
                }
                Emitted::MarkedData { .. } => {
                    panic!("a window emits results, which carry no watermark marks")
                }
            }
        }
    }
}

pub(super) fn run(options: &serde_json::Value, steps: &[Step]) -> Collected {
    let cfg = config(options, &schema());
    let mut op = operator(&cfg, &ctx());
    let mut c = Collected::default();
    run_steps(op.as_mut(), steps, &mut c);
    c
}

fn r(cells: &[&str]) -> Vec<String> {
    cells.iter().map(|s| (*s).to_owned()).collect()
}

fn tumble10() -> serde_json::Value {
    options(
        serde_json::json!({"type": "tumble", "size": 10}),
        serde_json::json!({}),
    )
}

#[test]
fn tumble_fires_at_end_minus_one_with_boundaries_and_negative_times() {
    let steps = vec![
        Step::Rows(batch(&[
            (Some(9), "a", 1),
            (Some(0), "a", 2),
            (Some(10), "a", 4),
            (Some(-1), "b", 8),
            (Some(-10), "b", 16),
        ])),
        Step::Wm(8),
        Step::Wm(9),
        Step::Wm(i64::MAX),
    ];
    let c = run(&tumble10(), &steps);
    let ts = |ms: i64| {
        arrow::util::display::array_value_to_string(
            &(Arc::new(arrow::array::TimestampMillisecondArray::from(vec![ms])) as ArrayRef),
            0,
        )
        .unwrap()
    };
    // Watermark 8 fires nothing; 9 fires [-10, 0) and [0, 10); the end of input fires the rest.
    assert_eq!(
        c.results,
        vec![
            r(&["b", &ts(-10), &ts(0), "2", "24", "16"]),
            r(&["a", &ts(0), &ts(10), "2", "3", "2"]),
            r(&["a", &ts(10), &ts(20), "1", "4", "4"]),
        ]
    );
    assert_eq!(c.watermarks, vec![8, 9, i64::MAX]);
}

#[test]
fn a_late_row_in_the_same_batch_is_judged_against_the_watermark_before_it() {
    // The source cut [2100, 100] at the watermark 1099 (ooo 1000): 100 arrives after it.
    let opts = options(
        serde_json::json!({"type": "tumble", "size": 1000}),
        serde_json::json!({"policy": "route"}),
    );
    let steps = vec![
        Step::Rows(batch(&[(Some(2100), "a", 1)])),
        Step::Wm(1099),
        Step::Rows(batch(&[(Some(100), "a", 2), (None, "a", 3)])),
        Step::Wm(i64::MAX),
    ];
    let c = run(&opts, &steps);
    assert_eq!(c.results.len(), 1);
    assert_eq!(c.results[0][3], "1");
    assert_eq!(
        c.late,
        vec![
            r(&["100", "a", "2", REASON_LATE]),
            r(&["", "a", "3", REASON_NULL_TIME])
        ]
    );
}

#[test]
fn a_row_behind_its_own_splits_watermark_is_late_while_its_window_is_still_open() {
    // The operator's watermark is 5 (another split is behind), but the rows of `c` were read
    // behind their split's watermark 25: [0, 10) and [10, 20) are late for them, [20, 30) is
    // not. The row of `b` after them carries no split watermark.
    let steps = [
        Step::Rows(batch(&[(Some(5), "a", 1)])),
        Step::Wm(5),
        Step::SplitWm(25),
        Step::Rows(batch(&[
            (Some(3), "c", 1),
            (Some(15), "c", 1),
            (Some(25), "c", 1),
        ])),
        Step::SplitWm(i64::MIN),
        Step::Rows(batch(&[(Some(15), "b", 1)])),
        Step::Wm(i64::MAX),
    ];
    let drop = serde_json::json!({"policy": "drop"});
    // Tumble: results for a [0, 10), c [20, 30) and b [10, 20).
    // Sessions of gap 10: c's [3, 13) and [15, 25) end at or before 25 (and c has no session
    // to join); c's [25, 35) does not; a and b are on time.
    for window in [
        serde_json::json!({"type": "tumble", "size": 10}),
        serde_json::json!({"type": "session", "gap": 10}),
    ] {
        let c = run(&options(window.clone(), drop.clone()), &steps);
        assert_eq!(c.results.len(), 3, "{window}: {:?}", c.results);
        assert_eq!(late_counts(window, drop.clone(), &steps), (2, 0, 0));
    }
}

#[test]
fn drop_policy_counts_late_and_null_rows() {
    let cfg = config(&tumble10(), &schema());
    let ctx = ctx();
    let mut op = operator(&cfg, &ctx);
    let mut c = Collected::default();
    run_steps(
        op.as_mut(),
        &[
            Step::Rows(batch(&[(Some(5), "a", 1)])),
            Step::Wm(20),
            Step::Rows(batch(&[
                (Some(3), "a", 1),
                (None, "a", 1),
                (Some(25), "a", 1),
            ])),
            Step::Wm(i64::MAX),
        ],
        &mut c,
    );
    assert_eq!(c.results.len(), 2);
    assert_eq!(
        ctx.dropped_rows.load(std::sync::atomic::Ordering::Relaxed),
        2
    );
}

/// Runs `steps` through a window with `window` and `late`; returns the late rows it dropped,
/// routed and counted as updates.
fn late_counts(
    window: serde_json::Value,
    late: serde_json::Value,
    steps: &[Step],
) -> (u64, u64, u64) {
    use std::sync::atomic::Ordering::Relaxed;
    let cfg = config(&options(window, late), &schema());
    let ctx = ctx();
    let mut op = operator(&cfg, &ctx);
    run_steps(op.as_mut(), steps, &mut Collected::default());
    (
        ctx.dropped_rows.load(Relaxed),
        ctx.late_routed_rows.load(Relaxed),
        ctx.late_updated_rows.load(Relaxed),
    )
}

#[test]
fn late_rows_routed_and_updated_are_counted() {
    let tumble = serde_json::json!({"type": "tumble", "size": 10});
    // Route: the late row and the null-time row go to the side output.
    let steps = [
        Step::Rows(batch(&[(Some(5), "a", 1)])),
        Step::Wm(20),
        Step::Rows(batch(&[
            (Some(3), "a", 1),
            (None, "a", 1),
            (Some(25), "a", 1),
        ])),
        Step::Wm(i64::MAX),
    ];
    let route = serde_json::json!({"policy": "route"});
    assert_eq!(late_counts(tumble.clone(), route, &steps), (0, 2, 0));
    // Update: two late rows within the deadline update results, one past it is dropped, and
    // a row of an open window is not late.
    let update = serde_json::json!({"policy": "update", "allowed_lateness": 5});
    let steps = [
        Step::Rows(batch(&[(Some(1), "a", 1)])),
        Step::Wm(9),
        Step::Rows(batch(&[
            (Some(3), "a", 10),
            (Some(4), "c", 7),
            (Some(12), "a", 1),
        ])),
        Step::Wm(14),
        Step::Rows(batch(&[(Some(5), "a", 100)])),
        Step::Wm(i64::MAX),
    ];
    assert_eq!(late_counts(tumble, update.clone(), &steps), (1, 0, 2));
    // A row in two fired hop windows counts once.
    let hop = serde_json::json!({"type": "hop", "size": 10, "slide": 5});
    let steps = [
        Step::Rows(batch(&[(Some(7), "a", 1)])),
        Step::Wm(14),
        Step::Rows(batch(&[(Some(6), "a", 1)])),
        Step::Wm(i64::MAX),
    ];
    assert_eq!(late_counts(hop, update.clone(), &steps), (0, 0, 1));
    // A late row that re-opens a fired session updates it; one that joins an open session
    // is not late.
    let session = serde_json::json!({"type": "session", "gap": 5});
    let steps = [
        Step::Rows(batch(&[(Some(1), "a", 1)])),
        Step::Wm(6),
        Step::Rows(batch(&[
            (Some(2), "a", 1),
            (Some(20), "b", 1),
            (Some(19), "b", 1),
        ])),
        Step::Wm(i64::MAX),
    ];
    assert_eq!(late_counts(session, update, &steps), (0, 0, 1));
}

#[test]
fn update_policy_reemits_the_corrected_row_until_the_deadline() {
    let opts = options(
        serde_json::json!({"type": "tumble", "size": 10}),
        serde_json::json!({"policy": "update", "allowed_lateness": 5}),
    );
    let steps = vec![
        Step::Rows(batch(&[(Some(1), "a", 1), (Some(2), "b", 2)])),
        Step::Wm(9),
        // Within the deadline 9 + 5 = 14: a corrects its row, c appears for the first time.
        Step::Rows(batch(&[(Some(3), "a", 10), (Some(4), "c", 7)])),
        Step::Wm(14),
        // Past the deadline: dropped.
        Step::Rows(batch(&[(Some(5), "a", 100)])),
        Step::Wm(i64::MAX),
    ];
    let c = run(&opts, &steps);
    let summary: Vec<(String, String, String)> = c
        .results
        .iter()
        .map(|row| (row[0].clone(), row[4].clone(), row[6].clone()))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("a".into(), "1".into(), "false".into()),
            ("b".into(), "2".into(), "false".into()),
            ("a".into(), "11".into(), "true".into()),
            ("c".into(), "7".into(), "false".into()),
        ]
    );
}

#[test]
fn hop_non_divisible_and_cumulate_windows() {
    let hop = options(
        serde_json::json!({"type": "hop", "size": 5, "slide": 2}),
        serde_json::json!({}),
    );
    let c = run(
        &hop,
        &[Step::Rows(batch(&[(Some(4), "a", 1)])), Step::Wm(i64::MAX)],
    );
    let bounds: Vec<(String, String)> = c
        .results
        .iter()
        .map(|r| (r[1].clone(), r[2].clone()))
        .collect();
    assert_eq!(bounds.len(), 3, "{bounds:?}");
    let cumulate = options(
        serde_json::json!({"type": "cumulate", "step": 2, "max_size": 6}),
        serde_json::json!({}),
    );
    let c = run(
        &cumulate,
        &[
            Step::Rows(batch(&[
                (Some(1), "a", 1),
                (Some(3), "a", 2),
                (Some(5), "a", 4),
            ])),
            Step::Wm(i64::MAX),
        ],
    );
    let sums: Vec<String> = c.results.iter().map(|r| r[4].clone()).collect();
    assert_eq!(sums, vec!["1", "3", "7"]);
}

#[test]
fn sessions_merge_when_a_row_bridges_them_and_one_gap_apart_is_one_session() {
    let opts = options(
        serde_json::json!({"type": "session", "gap": 10}),
        serde_json::json!({}),
    );
    let steps = vec![
        Step::Rows(batch(&[
            (Some(0), "a", 1),
            (Some(20), "a", 2),
            (Some(0), "b", 5),
        ])),
        // Exactly one gap after b's first row: the same session.
        Step::Rows(batch(&[(Some(10), "b", 6)])),
        // Bridges [0, 10) and [20, 30): [10, 20) touches both (inclusive bounds).
        Step::Rows(batch(&[(Some(10), "a", 4)])),
        Step::Wm(i64::MAX),
    ];
    let c = run(&opts, &steps);
    let got: Vec<(String, String, String)> = c
        .results
        .iter()
        .map(|row| (row[0].clone(), row[3].clone(), row[4].clone()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("b".into(), "2".into(), "11".into()),
            ("a".into(), "3".into(), "7".into())
        ]
    );
}

#[test]
fn aggregate_types_follow_the_input() {
    let input = Arc::new(Schema::new(vec![
        Field::new("ts", DataType::Int64, false),
        Field::new("f64", DataType::Float64, true),
        Field::new("f32", DataType::Float32, true),
        Field::new("i32", DataType::Int32, true),
    ]));
    let opts = serde_json::json!({
        "time_column": "ts",
        "window": {"type": "tumble", "size": 10},
        "aggregates": [
            {"function": "sum", "column": "f64"},
            {"function": "sum", "column": "f32"},
            {"function": "min", "column": "f32"},
            {"function": "max", "column": "f64"},
            {"function": "sum", "column": "i32"},
            {"function": "avg", "column": "i32"},
        ],
    });
    let cfg = config(&opts, &input);
    let types: Vec<DataType> = cfg
        .output_schema
        .fields()
        .iter()
        .skip(2)
        .map(|f| f.data_type().clone())
        .collect();
    assert_eq!(
        types,
        vec![
            DataType::Float64,
            DataType::Float32,
            DataType::Float32,
            DataType::Float64,
            DataType::Int64,
            DataType::Float64
        ]
    );
    let b = RecordBatch::try_new(
        input,
        vec![
            Arc::new(Int64Array::from(vec![1, 2])),
            Arc::new(Float64Array::from(vec![Some(-0.5), None])),
            Arc::new(Float32Array::from(vec![None, Some(-1.5f32)])),
            Arc::new(Int32Array::from(vec![Some(3), Some(4)])),
        ],
    )
    .unwrap();
    let mut op = operator(&cfg, &ctx());
    let mut out = Output::new();
    op.process_batch(0, b, &mut out).unwrap();
    op.process_watermark(Watermark::END, &mut out).unwrap();
    let result = out
        .drain()
        .find_map(|e| match e {
            Emitted::Data { batch, .. } => Some(batch),
            Emitted::Watermark(_) | Emitted::SplitWatermark(_) | Emitted::MarkedData { .. } => None,
        })
        .unwrap();
    assert_eq!(
        result.column(2).as_primitive::<Float64Type>().value(0),
        -0.5
    );
    assert_eq!(
        result.column(3).as_primitive::<Float32Type>().value(0),
        -1.5
    );
    // The max of floats is a float, not an integer sentinel.
    assert_eq!(
        result.column(5).as_primitive::<Float64Type>().value(0),
        -0.5
    );
    assert_eq!(result.column(6).as_primitive::<Int64Type>().value(0), 7);
}

#[test]
fn results_do_not_depend_on_where_batches_are_cut() {
    let rows: Vec<(Option<i64>, String, i64)> = (0..3000)
        .map(|i| {
            let ts = (i * 37) % 2000 - 300;
            (Some(ts), format!("k{}", i % 13), i)
        })
        .collect();
    for kind in [
        serde_json::json!({"type": "tumble", "size": 100}),
        serde_json::json!({"type": "hop", "size": 100, "slide": 30}),
        serde_json::json!({"type": "session", "gap": 7}),
    ] {
        let opts = options(kind.clone(), serde_json::json!({"policy": "route"}));
        let mut reference: Option<Collected> = None;
        for size in [1, 7, 1000, 65_536] {
            let mut steps = Vec::new();
            // Watermarks at fixed row positions (every 500 rows), batches cut at `size`.
            for chunk in rows.chunks(500) {
                for piece in chunk.chunks(size) {
                    let owned: Vec<(Option<i64>, &str, i64)> =
                        piece.iter().map(|(t, k, v)| (*t, k.as_str(), *v)).collect();
                    steps.push(Step::Rows(batch(&owned)));
                }
                let max = chunk.iter().filter_map(|r| r.0).max().unwrap_or(0);
                steps.push(Step::Wm(max - 500));
            }
            steps.push(Step::Wm(i64::MAX));
            let c = run(&opts, &steps);
            match &reference {
                None => reference = Some(c),
                Some(want) => assert_eq!(&c, want, "{kind} cut at {size}"),
            }
        }
    }
}

/// The image `op` hands over at barrier `epoch`, encoded as the runtime writes it.
fn image_at(op: &mut dyn Operator, epoch: u64) -> Arc<Vec<StateRows>> {
    let barrier = Barrier::new(Epoch(epoch));
    op.on_barrier(barrier, &mut Output::new()).unwrap();
    let image = op
        .snapshot_image(barrier)
        .unwrap()
        .expect("a window hands over an image");
    Arc::new(image.encode().unwrap())
}

/// A context restoring `image`.
fn restoring(image: Arc<Vec<StateRows>>) -> TaskContext {
    let mut ctx = ctx();
    ctx.restored_image = Some(image);
    ctx
}

#[test]
fn windows_survive_a_barrier_and_a_new_instance() {
    for (kind, late) in [
        (
            serde_json::json!({"type": "tumble", "size": 10}),
            serde_json::json!({}),
        ),
        (
            serde_json::json!({"type": "hop", "size": 10, "slide": 4}),
            serde_json::json!({"policy": "update", "allowed_lateness": 20}),
        ),
        (
            serde_json::json!({"type": "session", "gap": 5}),
            serde_json::json!({"policy": "update", "allowed_lateness": 20}),
        ),
    ] {
        let opts = options(kind.clone(), late);
        let first = vec![
            Step::Rows(batch(&[
                (Some(1), "a", 1),
                (Some(12), "b", 2),
                (Some(3), "a", 3),
            ])),
            Step::Wm(10),
            Step::Rows(batch(&[(Some(14), "a", 5), (Some(2), "a", 7)])),
        ];
        let second = vec![
            Step::Rows(batch(&[(Some(25), "b", 11), (Some(4), "a", 13)])),
            Step::Wm(30),
            Step::Rows(batch(&[(Some(21), "b", 17)])),
            Step::Wm(i64::MAX),
        ];
        let all: Vec<Step> = first.iter().chain(&second).cloned().collect();
        let uninterrupted = run(&opts, &all);

        let cfg = config(&opts, &schema());
        let mut c = Collected::default();
        let image = {
            let mut op = operator(&cfg, &ctx());
            run_steps(op.as_mut(), &first, &mut c);
            image_at(op.as_mut(), 1)
        };
        let mut op = operator(&cfg, &restoring(image));
        run_steps(op.as_mut(), &second, &mut c);
        // Within one firing, the order of keys may differ after a restore.
        let sorted = |mut c: Collected| {
            c.results.sort();
            c
        };
        assert_eq!(sorted(c), sorted(uninterrupted), "{kind}");
    }
}

/// Barriers after every step and a restore into a new instance after any step, twice, from the
/// image of the last barrier: the results equal an uninterrupted run's, and the last image
/// holds no window.
#[test]
fn restores_from_the_image_of_any_barrier_match_an_uninterrupted_run() {
    let steps = vec![
        Step::Rows(batch(&[
            (Some(1), "a", 1),
            (Some(12), "b", 2),
            (Some(3), "a", 3),
        ])),
        Step::Wm(4),
        Step::Rows(batch(&[(Some(14), "a", 5), (Some(2), "a", 7)])),
        Step::Wm(10),
        Step::Rows(batch(&[(Some(5), "b", 9), (Some(22), "a", 10)])),
        Step::Wm(21),
        Step::Rows(batch(&[(Some(25), "b", 11), (Some(4), "a", 13)])),
        Step::Wm(30),
        Step::Rows(batch(&[(Some(21), "b", 17), (Some(31), "c", 19)])),
        Step::Wm(i64::MAX),
    ];
    for (kind, late) in [
        (
            serde_json::json!({"type": "tumble", "size": 10}),
            serde_json::json!({}),
        ),
        (
            serde_json::json!({"type": "hop", "size": 10, "slide": 4}),
            serde_json::json!({"policy": "update", "allowed_lateness": 12}),
        ),
        (
            serde_json::json!({"type": "cumulate", "max_size": 20, "step": 5}),
            serde_json::json!({"policy": "update", "allowed_lateness": 6}),
        ),
        (
            serde_json::json!({"type": "session", "gap": 5}),
            serde_json::json!({"policy": "update", "allowed_lateness": 6}),
        ),
    ] {
        let opts = options(kind.clone(), late);
        let uninterrupted = run(&opts, &steps);
        let cfg = config(&opts, &schema());
        for first in 1..steps.len() {
            for second in first..steps.len() {
                let mut c = Collected::default();
                let mut epoch = 0;
                let mut ctx = ctx();
                for range in [0..first, first..second, second..steps.len()] {
                    let mut op = operator(&cfg, &ctx);
                    let mut image = None;
                    for step in &steps[range] {
                        run_steps(op.as_mut(), std::slice::from_ref(step), &mut c);
                        epoch += 1;
                        image = Some(image_at(op.as_mut(), epoch));
                    }
                    if let Some(image) = image {
                        ctx = restoring(image);
                    }
                }
                // Every window fired at the end: the last barrier's image holds no window.
                let left = WindowState::restore(&ctx, &cfg).unwrap();
                assert!(
                    left.windows.is_empty(),
                    "{kind}: windows left in state: {:?}",
                    left.windows.keys().collect::<Vec<_>>()
                );
                assert_eq!(left.watermark, i64::MAX, "{kind}");
                let sorted = |mut c: Collected| {
                    c.results.sort();
                    c
                };
                assert_eq!(
                    sorted(c),
                    sorted(uninterrupted.clone()),
                    "{kind}: restored after steps {first} and {second}"
                );
            }
        }
    }
}

#[test]
fn bad_options_name_their_path() {
    let bad = |opts: serde_json::Value| {
        let opts: WindowOptions = match serde_json::from_value(opts) {
            Ok(o) => o,
            Err(e) => return e.to_string(),
        };
        WindowConfig::resolve(&opts, &schema(), "operators[2].options")
            .unwrap_err()
            .to_string()
    };
    let mut o = tumble10();
    o["key_by"] = serde_json::json!(["nope"]);
    let e = bad(o);
    assert!(
        e.contains("operators[2].options.key_by[0]") && e.contains("ts, k, v"),
        "{e}"
    );
    let mut o = tumble10();
    o["time_column"] = serde_json::json!("k");
    assert!(bad(o).contains("operators[2].options.time_column"));
    let mut o = tumble10();
    o["aggregates"][1]["function"] = serde_json::json!("median");
    assert!(bad(o).contains("operators[2].options.aggregates[1].function"));
    let o = options(
        serde_json::json!({"type": "tumble", "size": 10}),
        serde_json::json!({"allowed_lateness": 5}),
    );
    assert!(bad(o).contains("late.allowed_lateness"));
    let o = options(
        serde_json::json!({"type": "hop", "size": 10, "slide": 0}),
        serde_json::json!({}),
    );
    assert!(bad(o).contains("slide"));
}
