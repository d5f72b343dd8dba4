//! `regular_join` on hand-made inputs: padded rows that are retracted when a match arrives and
//! come back when it is retracted, inner joins of insert-only inputs that stay insert-only, the
//! condition, null keys, and a table that does not depend on the order the sides arrive in.

use super::*;
use crate::test_state::{Backend, ctx};
use arrow::array::{Int8Array, Int64Array, RecordBatch, StringArray};
use std::collections::BTreeMap;
use weir_api::changelog::{RowKind, row_kinds};
use weir_api::{Emitted, OperatorId, Output};

/// `(k, v)` rows of one side (`l` or `r` prefixes the column names), with kinds if given.
fn side(prefix: &str, rows: &[(Option<&str>, i64)], kinds: Option<&[RowKind]>) -> RecordBatch {
    let mut fields = vec![
        Field::new(format!("{prefix}k"), DataType::Utf8, true),
        Field::new(format!("{prefix}v"), DataType::Int64, false),
    ];
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(
            rows.iter().map(|r| r.0).collect::<Vec<_>>(),
        )),
        Arc::new(Int64Array::from(
            rows.iter().map(|r| r.1).collect::<Vec<_>>(),
        )),
    ];
    if let Some(kinds) = kinds {
        fields.push(row_kind_field());
        columns.push(Arc::new(Int8Array::from(
            kinds.iter().map(|k| k.as_i8()).collect::<Vec<_>>(),
        )));
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).expect("batch")
}

use arrow::array::ArrayRef;

fn prepare(join: &str, condition: Option<&str>, updating: bool) -> Arc<dyn PreparedOperator> {
    let options = serde_json::json!({
        "join": join, "left_keys": ["lk"], "right_keys": ["rk"],
    });
    prepare_options(options, condition, updating)
}

fn prepare_options(
    options: serde_json::Value,
    condition: Option<&str>,
    updating: bool,
) -> Arc<dyn PreparedOperator> {
    prepare_sides(options, condition, [updating; 2])
}

/// A join whose sides are updating (carry row kinds) as `updating` says.
fn prepare_sides(
    mut options: serde_json::Value,
    condition: Option<&str>,
    updating: [bool; 2],
) -> Arc<dyn PreparedOperator> {
    if let Some(c) = condition {
        options["condition"] = serde_json::json!(c);
    }
    let kinds: &[RowKind] = &[RowKind::Insert];
    let [left, right] = updating.map(|u| u.then_some(kinds));
    RegularJoinFactory::default()
        .prepare(&OperatorArgs {
            operator_id: &OperatorId::new("j"),
            options: &options,
            options_path: "operators[0].options",
            input_schemas: &[
                side("l", &[(Some("a"), 0)], left).schema(),
                side("r", &[(Some("a"), 0)], right).schema(),
            ],
        })
        .expect("prepares")
}

/// Every output row as `kind lk lv rk rv` (`+I` when the output has no kinds).
fn run(op: &mut dyn Operator, steps: &[(usize, RecordBatch)]) -> Vec<String> {
    let mut rows = Vec::new();
    for (input, batch) in steps {
        let mut out = Output::new();
        op.process_batch(*input, batch.clone(), &mut out)
            .expect("processes");
        for e in out.drain() {
            let Emitted::Data { batch, .. } = e else {
                continue;
            };
            let kinds = row_kinds(&batch).expect("kinds");
            for r in 0..batch.num_rows() {
                let kind = kinds.map_or(RowKind::Insert, |k| {
                    RowKind::from_i8(k.value(r)).expect("kind")
                });
                let mut cells = vec![kind.short_string().to_owned()];
                for c in &batch.columns()[..4] {
                    cells.push(
                        arrow::util::display::ArrayFormatter::try_new(
                            c.as_ref(),
                            &arrow::util::display::FormatOptions::default().with_null("-"),
                        )
                        .expect("formatter")
                        .value(r)
                        .to_string(),
                    );
                }
                rows.push(cells.join(" "));
            }
        }
    }
    rows
}

/// A checkpoint barrier of `epoch` through `op`, and the state it wrote committed.
fn barrier(op: &mut dyn Operator, backend: &Backend, epoch: u64) {
    let barrier = weir_api::Barrier {
        epoch: weir_api::Epoch(epoch),
        is_final: false,
    };
    op.on_barrier(barrier, &mut Output::new())
        .expect("writes out");
    backend.redb.commit().expect("commits");
}

/// The multiset the changes leave: +I/+U add a row, -U/-D take one away.
fn materialize(rows: &[String]) -> BTreeMap<String, i64> {
    let mut table = BTreeMap::new();
    for row in rows {
        let (kind, rest) = row.split_once(' ').expect("kind");
        let sign = if kind.starts_with('+') { 1 } else { -1 };
        *table.entry(rest.to_owned()).or_insert(0) += sign;
    }
    table.retain(|_, n| *n != 0);
    assert!(
        table.values().all(|n| *n > 0),
        "a row retracted twice: {table:?}"
    );
    table
}

#[test]
fn a_left_row_is_padded_until_it_matches_and_again_when_the_match_is_retracted() {
    use RowKind::*;
    let backend = Backend::new("left-join");
    let mut op = prepare("left", None, true)
        .create(&ctx(&backend))
        .expect("creates");
    let rows = run(
        op.as_mut(),
        &[
            (0, side("l", &[(Some("a"), 1)], Some(&[Insert]))),
            (
                1,
                side(
                    "r",
                    &[(Some("a"), 7), (Some("b"), 8)],
                    Some(&[Insert, Insert]),
                ),
            ),
            (1, side("r", &[(Some("a"), 9)], Some(&[Insert]))),
            (
                1,
                side(
                    "r",
                    &[(Some("a"), 7), (Some("a"), 9)],
                    Some(&[Delete, Delete]),
                ),
            ),
            // A retraction of a row that was never there changes nothing.
            (0, side("l", &[(Some("z"), 1)], Some(&[Delete]))),
            (0, side("l", &[(None, 2)], Some(&[Insert]))),
        ],
    );
    assert_eq!(
        rows,
        [
            "+I a 1 - -",
            "-D a 1 - -",
            "+I a 1 a 7",
            "+I a 1 a 9",
            "-D a 1 a 7",
            "-D a 1 a 9",
            "+I a 1 - -",
            "+I - 2 - -",
        ]
    );
}

#[test]
fn an_inner_join_of_insert_only_inputs_stays_insert_only() {
    let backend = Backend::new("inner-join");
    let prepared = prepare("inner", Some("lv < rv"), false);
    assert!(
        weir_api::changelog::row_kind_index(&prepared.output_schema()).is_none(),
        "no row kinds"
    );
    let mut op = prepared.create(&ctx(&backend)).expect("creates");
    let rows = run(
        op.as_mut(),
        &[
            (0, side("l", &[(Some("a"), 5), (Some("a"), 1)], None)),
            (1, side("r", &[(Some("a"), 3), (Some("c"), 9)], None)),
            (0, side("l", &[(Some("a"), 2)], None)),
        ],
    );
    assert_eq!(rows, ["+I a 1 a 3", "+I a 2 a 3"]);
}

#[test]
fn a_full_join_pads_both_sides_where_the_condition_fails() {
    let backend = Backend::new("full-join");
    let mut op = prepare("full", Some("lv + rv > 10"), false)
        .create(&ctx(&backend))
        .expect("creates");
    let rows = run(
        op.as_mut(),
        &[
            (0, side("l", &[(Some("a"), 1)], None)),
            (1, side("r", &[(Some("a"), 2)], None)),
            (0, side("l", &[(Some("a"), 9)], None)),
        ],
    );
    assert_eq!(
        materialize(&rows).into_keys().collect::<Vec<_>>(),
        ["a 1 - -", "a 9 a 2"],
        "{rows:?}"
    );
}

#[test]
fn the_table_does_not_depend_on_the_order_the_sides_arrive_in() {
    let left: Vec<(Option<&str>, i64)> = (0..12_i64)
        .map(|i| (Some(["a", "b", "c"][(i % 3) as usize]), i))
        .collect();
    let right: Vec<(Option<&str>, i64)> = (0..8_i64)
        .map(|i| (Some(["a", "b", "d"][(i % 3) as usize]), 100 + i))
        .collect();
    let orders: [Vec<(usize, usize)>; 3] = [
        // (side, row) in three interleavings.
        (0..12)
            .map(|i| (0, i))
            .chain((0..8).map(|i| (1, i)))
            .collect(),
        (0..8)
            .map(|i| (1, i))
            .chain((0..12).map(|i| (0, i)))
            .collect(),
        (0..12)
            .flat_map(|i| {
                let mut v = vec![(0, i)];
                if i < 8 {
                    v.push((1, 7 - i));
                }
                v
            })
            .collect(),
    ];
    let mut tables = Vec::new();
    for (n, order) in orders.iter().enumerate() {
        let backend = Backend::new(&format!("orders{n}"));
        let mut op = prepare("full", Some("(lv + rv) % 2 = 0"), false)
            .create(&ctx(&backend))
            .expect("creates");
        let steps: Vec<(usize, RecordBatch)> = order
            .iter()
            .map(|&(s, i)| {
                let (prefix, rows) = if s == 0 { ("l", &left) } else { ("r", &right) };
                (s, side(prefix, &rows[i..=i], None))
            })
            .collect();
        tables.push(materialize(&run(op.as_mut(), &steps)));
    }
    assert!(tables[0].len() > 10);
    assert_eq!(tables[0], tables[1]);
    assert_eq!(tables[0], tables[2]);
}

#[test]
fn a_row_whose_state_expired_matches_nothing_later() {
    let clock = weir_state::ManualClock::new(1_000);
    let backend = Backend::with_clock("join-ttl", Arc::new(clock.clone()));
    let options = serde_json::json!({
        "join": "inner", "left_keys": ["lk"], "right_keys": ["rk"], "state_ttl": 1_000,
    });
    let mut op = prepare_options(options, None, false)
        .create(&ctx(&backend))
        .expect("creates");
    let mut rows = run(op.as_mut(), &[(0, side("l", &[(Some("a"), 1)], None))]);
    clock.advance(500);
    rows.extend(run(op.as_mut(), &[(1, side("r", &[(Some("a"), 2)], None))]));
    clock.advance(1_500);
    rows.extend(run(op.as_mut(), &[(1, side("r", &[(Some("a"), 3)], None))]));
    assert_eq!(
        rows,
        ["+I a 1 a 2"],
        "the left row expired before the second right row"
    );
}

/// Updating rows of both sides over a few keys, with retractions of rows sent before, in
/// batches of 3.
fn changing_steps() -> Vec<(usize, RecordBatch)> {
    use RowKind::*;
    let mut steps = Vec::new();
    for round in 0..6_i64 {
        for s in 0..2 {
            let prefix = if s == 0 { "l" } else { "r" };
            let keys = ["a", "b", "c"];
            let rows: Vec<(Option<&str>, i64)> = (0..3)
                .map(|i| {
                    (
                        Some(keys[((round + i + s as i64) % 3) as usize]),
                        round * 10 + i,
                    )
                })
                .collect();
            steps.push((s, side(prefix, &rows, Some(&[Insert, Insert, Insert]))));
            if round > 0 {
                // Take back the middle row of the round before.
                let before = round - 1;
                let key = keys[((before + 1 + s as i64) % 3) as usize];
                steps.push((
                    s,
                    side(prefix, &[(Some(key), before * 10 + 1)], Some(&[Delete])),
                ));
            }
        }
    }
    steps
}

#[test]
fn the_table_does_not_depend_on_the_buffer_or_on_barriers() {
    let mut tables = Vec::new();
    for (n, (buffer, barriers)) in [
        (32 << 20, false),
        (0, false),
        (300, false),
        (32 << 20, true),
    ]
    .into_iter()
    .enumerate()
    {
        let backend = Backend::new(&format!("buffer{n}"));
        let options = serde_json::json!({
            "join": "full", "left_keys": ["lk"], "right_keys": ["rk"], "buffer_bytes": buffer,
        });
        let mut op = prepare_options(options, Some("lv <= rv + 5"), true)
            .create(&ctx(&backend))
            .expect("creates");
        let mut rows = Vec::new();
        for (i, step) in changing_steps().into_iter().enumerate() {
            rows.extend(run(op.as_mut(), &[step]));
            if barriers && i % 4 == 3 {
                barrier(op.as_mut(), &backend, i as u64);
            }
        }
        tables.push(materialize(&rows));
    }
    assert!(tables[0].len() > 8, "{:?}", tables[0]);
    for (n, table) in tables.iter().enumerate().skip(1) {
        assert_eq!(&tables[0], table, "run {n}");
    }
}

#[test]
fn a_new_instance_matches_the_rows_written_at_a_barrier() {
    let backend = Backend::new("join-restore");
    let prepared = prepare("left", None, false);
    let mut first = prepared.create(&ctx(&backend)).expect("creates");
    run(
        first.as_mut(),
        &[(0, side("l", &[(Some("a"), 1), (Some("b"), 2)], None))],
    );
    barrier(first.as_mut(), &backend, 1);
    // Held after the barrier only: a new instance must not see it.
    run(first.as_mut(), &[(0, side("l", &[(Some("a"), 3)], None))]);
    drop(first);
    let mut second = prepared.create(&ctx(&backend)).expect("creates");
    let rows = run(second.as_mut(), &[(1, side("r", &[(Some("a"), 7)], None))]);
    assert_eq!(
        rows,
        ["-D a 1 - -", "+I a 1 a 7"],
        "the left row of `a` came back from keyed state, padded"
    );
}

/// An insert-only left side whose rows come again and again (copies of one row arrive in
/// different batches), joined FULL with an updating right side: its copies are held apart and
/// added up when written, whatever the buffer, barriers or a new instance in between.
#[test]
fn copies_of_an_insert_only_row_add_up_through_the_buffer_barriers_and_a_restore() {
    use RowKind::*;
    let mut steps: Vec<(usize, RecordBatch)> = Vec::new();
    let keys = ["a", "b", "c"];
    for round in 0..8_i64 {
        let left: Vec<(Option<&str>, i64)> = (0..4)
            .map(|i| (Some(keys[((round + i) % 3) as usize]), i % 2))
            .collect();
        steps.push((0, side("l", &left, None)));
        let k = keys[(round % 3) as usize];
        steps.push((1, side("r", &[(Some(k), round % 3)], Some(&[Insert]))));
        if round % 3 == 2 {
            steps.push((1, side("r", &[(Some(k), round % 3)], Some(&[Delete]))));
        }
    }
    // (buffer, barrier every n steps, a new instance at each barrier)
    let runs = [
        (32 << 20, None, false),
        (0, None, false),
        (100, None, false),
        (32 << 20, Some(3), false),
        (32 << 20, Some(3), true),
        (100, Some(2), true),
    ];
    let mut tables = Vec::new();
    for (n, (buffer, every, restore)) in runs.into_iter().enumerate() {
        let backend = Backend::new(&format!("copies{n}"));
        let options = serde_json::json!({
            "join": "full", "left_keys": ["lk"], "right_keys": ["rk"], "buffer_bytes": buffer,
        });
        let prepared_run = prepare_sides(options, Some("lv <= rv"), [false, true]);
        let mut op = prepared_run.create(&ctx(&backend)).expect("creates");
        let mut rows = Vec::new();
        for (i, step) in steps.iter().enumerate() {
            rows.extend(run(op.as_mut(), std::slice::from_ref(step)));
            if every.is_some_and(|e| i % e == e - 1) {
                barrier(op.as_mut(), &backend, i as u64);
                if restore {
                    op = prepared_run.create(&ctx(&backend)).expect("creates again");
                }
            }
        }
        tables.push(materialize(&rows));
    }
    // The table of the final inputs, joined by hand.
    let mut left: Vec<(String, i64)> = Vec::new();
    let mut right: Vec<(String, i64)> = Vec::new();
    for (input, batch) in &steps {
        let kinds = row_kinds(batch).expect("kinds");
        let ks = batch
            .column(0)
            .as_any()
            .downcast_ref::<StringArray>()
            .expect("keys");
        let vs = batch
            .column(1)
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("values");
        for r in 0..batch.num_rows() {
            let row = (ks.value(r).to_owned(), vs.value(r));
            let held = if *input == 0 { &mut left } else { &mut right };
            if kinds.is_some_and(|k| k.value(r) == Delete.as_i8()) {
                let at = held
                    .iter()
                    .position(|h| *h == row)
                    .expect("retracted row held");
                held.remove(at);
            } else {
                held.push(row);
            }
        }
    }
    let mut expected: BTreeMap<String, i64> = BTreeMap::new();
    let matches = |l: &(String, i64), r: &(String, i64)| l.0 == r.0 && l.1 <= r.1;
    for l in &left {
        let mut any = false;
        for r in right.iter().filter(|r| matches(l, r)) {
            any = true;
            *expected
                .entry(format!("{} {} {} {}", l.0, l.1, r.0, r.1))
                .or_insert(0) += 1;
        }
        if !any {
            *expected.entry(format!("{} {} - -", l.0, l.1)).or_insert(0) += 1;
        }
    }
    for r in right.iter().filter(|r| !left.iter().any(|l| matches(l, r))) {
        *expected.entry(format!("- - {} {}", r.0, r.1)).or_insert(0) += 1;
    }
    assert!(
        expected.values().any(|n| *n > 1),
        "copies of a row: {expected:?}"
    );
    for (n, table) in tables.iter().enumerate() {
        assert_eq!(table, &expected, "run {n}: {:?}", runs[n]);
    }
}
