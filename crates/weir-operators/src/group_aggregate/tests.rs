//! `group_aggregate` on hand-made inputs: the changes it emits per batch, retractions of an
//! updating input, results that do not depend on how the input is cut into batches, and
//! groups read back from keyed state by a new instance (a restore).

use super::*;
use crate::test_state::{Backend, ctx};
use arrow::array::{Int8Array, Int64Array, StringArray};
use arrow::datatypes::DataType;
use std::collections::BTreeMap;
use weir_api::{Emitted, OperatorId};

fn input_schema(updating: bool) -> SchemaRef {
    let mut fields = vec![
        Field::new("k", DataType::Utf8, false),
        Field::new("v", DataType::Int64, true),
    ];
    if updating {
        fields.push(row_kind_field());
    }
    Arc::new(Schema::new(fields))
}

/// Rows `(k, v)`, or `(k, v, kind)` on an updating input.
fn batch(rows: &[(&str, Option<i64>)], kinds: Option<&[RowKind]>) -> RecordBatch {
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(
            rows.iter().map(|r| r.0).collect::<Vec<_>>(),
        )),
        Arc::new(Int64Array::from(
            rows.iter().map(|r| r.1).collect::<Vec<_>>(),
        )),
    ];
    if let Some(kinds) = kinds {
        columns.push(Arc::new(Int8Array::from(
            kinds.iter().map(|k| k.as_i8()).collect::<Vec<_>>(),
        )));
    }
    RecordBatch::try_new(input_schema(kinds.is_some()), columns).expect("batch")
}

fn prepare(updating: bool, buffer_bytes: u64) -> Arc<dyn PreparedOperator> {
    prepare_with(updating, buffer_bytes, None)
}

fn prepare_with(updating: bool, buffer_bytes: u64, ttl: Option<u64>) -> Arc<dyn PreparedOperator> {
    let mut options = serde_json::json!({
        "key_by": ["k"],
        "aggregates": [
            {"function": "count", "as": "n"},
            {"function": "sum", "column": "v", "as": "total"},
            {"function": "min", "column": "v", "as": "low"},
            {"function": "max", "column": "v", "as": "high"},
            {"function": "avg", "column": "v", "as": "mean"},
            {"function": "count", "column": "v", "distinct": true, "as": "values"},
        ],
        "buffer_bytes": buffer_bytes,
    });
    if let Some(ttl) = ttl {
        options["state_ttl"] = serde_json::json!(ttl);
    }
    GroupAggregateFactory
        .prepare(&OperatorArgs {
            operator_id: &OperatorId::new("g"),
            options: &options,
            options_path: "operators[0].options",
            input_schemas: &[input_schema(updating)],
        })
        .expect("prepares")
}

/// Every change emitted, as `kind k n total low high mean values`.
fn run(op: &mut dyn Operator, batches: &[RecordBatch]) -> Vec<String> {
    let mut changes = Vec::new();
    for b in batches {
        let mut out = Output::new();
        op.process_batch(0, b.clone(), &mut out).expect("processes");
        for e in out.drain() {
            let Emitted::Data { batch, .. } = e else {
                continue;
            };
            let kinds = weir_api::changelog::row_kinds(&batch)
                .expect("kinds")
                .expect("updating");
            for r in 0..batch.num_rows() {
                let mut cells = vec![
                    RowKind::from_i8(kinds.value(r))
                        .expect("kind")
                        .short_string()
                        .to_owned(),
                ];
                for c in &batch.columns()[..batch.num_columns() - 1] {
                    cells
                        .push(arrow::util::display::array_value_to_string(c, r).expect("displays"));
                }
                changes.push(cells.join(" "));
            }
        }
    }
    changes
}

/// The table the changes leave: per key, its last `+I`/`+U` unless a `-D` followed.
fn materialize(changes: &[String]) -> BTreeMap<String, String> {
    let mut table = BTreeMap::new();
    for change in changes {
        let (kind, row) = change.split_once(' ').expect("kind");
        let key = row.split(' ').next().expect("key").to_owned();
        match kind {
            "+I" | "+U" => {
                table.insert(key, row.to_owned());
            }
            "-D" => {
                table.remove(&key);
            }
            _ => {}
        }
    }
    table
}

#[test]
fn a_key_is_inserted_then_updated_and_unchanged_results_emit_nothing() {
    let backend = Backend::new("updates");
    let prepared = prepare(false, DEFAULT_BUFFER_BYTES);
    let mut op = prepared.create(&ctx(&backend)).expect("creates");
    let changes = run(
        op.as_mut(),
        &[
            batch(&[("a", Some(3)), ("b", Some(1)), ("a", Some(5))], None),
            batch(&[("a", Some(4))], None),
            batch(&[("b", None)], None),
        ],
    );
    assert_eq!(
        changes,
        [
            "+I a 2 8 3 5 4.0 2",
            "+I b 1 1 1 1 1.0 1",
            "-U a 2 8 3 5 4.0 2",
            "+U a 3 12 3 5 4.0 3",
            // A null value counts as a row but changes no aggregate of values.
            "-U b 1 1 1 1 1.0 1",
            "+U b 2 1 1 1 1.0 1",
        ]
    );
    assert_eq!(
        prepared.output_schema().field(7).name(),
        weir_api::ROW_KIND_COLUMN
    );
}

#[test]
fn retractions_subtract_fall_back_to_the_next_extreme_and_delete_an_empty_group() {
    use RowKind::*;
    let backend = Backend::new("retractions");
    let mut op = prepare(true, DEFAULT_BUFFER_BYTES)
        .create(&ctx(&backend))
        .expect("creates");
    let changes = run(
        op.as_mut(),
        &[
            batch(
                &[("a", Some(3)), ("a", Some(9)), ("a", Some(3))],
                Some(&[Insert, Insert, Insert]),
            ),
            // The 9 is replaced by 1: the max falls back to 3, the min becomes 1.
            batch(
                &[("a", Some(9)), ("a", Some(1))],
                Some(&[UpdateBefore, UpdateAfter]),
            ),
            // A retraction of a key with no rows is ignored.
            batch(&[("z", Some(7))], Some(&[Delete])),
            batch(
                &[("a", Some(3)), ("a", Some(3)), ("a", Some(1))],
                Some(&[Delete, Delete, Delete]),
            ),
            batch(&[("a", Some(2))], Some(&[Insert])),
        ],
    );
    assert_eq!(
        changes,
        [
            "+I a 3 15 3 9 5.0 2",
            "-U a 3 15 3 9 5.0 2",
            "+U a 3 7 1 3 2.3333333333333335 2",
            "-D a 3 7 1 3 2.3333333333333335 2",
            "+I a 1 2 2 2 2.0 1",
        ]
    );
}

#[test]
fn the_materialized_results_do_not_depend_on_batch_cuts() {
    let rows: Vec<(String, Option<i64>)> = (0..200_i64)
        .map(|i| {
            let k = format!("k{}", (i * 7919) % 13);
            let v = (i % 11 != 0).then_some((i * 31) % 97 - 40);
            (k, v)
        })
        .collect();
    let mut tables = Vec::new();
    for (cut, budget) in [(200, DEFAULT_BUFFER_BYTES), (1, 0), (7, 300), (64, 0)] {
        let backend = Backend::new(&format!("cuts{cut}"));
        let mut op = prepare(false, budget)
            .create(&ctx(&backend))
            .expect("creates");
        let batches: Vec<RecordBatch> = rows
            .chunks(cut)
            .map(|chunk| {
                let refs: Vec<(&str, Option<i64>)> =
                    chunk.iter().map(|(k, v)| (k.as_str(), *v)).collect();
                batch(&refs, None)
            })
            .collect();
        tables.push(materialize(&run(op.as_mut(), &batches)));
    }
    assert_eq!(tables[0].len(), 13);
    for t in &tables[1..] {
        assert_eq!(t, &tables[0]);
    }
}

#[test]
fn a_new_instance_reads_the_groups_written_at_a_barrier() {
    let backend = Backend::new("restore");
    let prepared = prepare(false, DEFAULT_BUFFER_BYTES);
    let mut first = prepared.create(&ctx(&backend)).expect("creates");
    run(
        first.as_mut(),
        &[batch(&[("a", Some(3)), ("b", Some(4))], None)],
    );
    let barrier = weir_api::Barrier {
        epoch: weir_api::Epoch(1),
        is_final: false,
    };
    first
        .on_barrier(barrier, &mut Output::new())
        .expect("writes out");
    backend.redb.commit().expect("commits");
    drop(first);
    let mut second = prepared.create(&ctx(&backend)).expect("creates");
    let changes = run(second.as_mut(), &[batch(&[("a", Some(10))], None)]);
    assert_eq!(
        changes,
        ["-U a 1 3 3 3 3.0 1", "+U a 2 13 3 10 6.5 2"],
        "the group of `a` came back from keyed state"
    );
}

#[test]
fn options_that_cannot_be_computed_name_their_path() {
    let options = serde_json::json!({
        "key_by": ["k"],
        "aggregates": [{"function": "sum", "column": "k"}],
    });
    let err = GroupAggregateFactory
        .prepare(&OperatorArgs {
            operator_id: &OperatorId::new("g"),
            options: &options,
            options_path: "operators[3].options",
            input_schemas: &[input_schema(false)],
        })
        .expect_err("a sum of strings");
    let text = err.to_string();
    assert!(
        text.contains("operators[3].options.aggregates[0]") && text.contains("SUM and AVG"),
        "{text}"
    );
}

#[test]
fn a_group_whose_state_expired_starts_afresh_and_its_retractions_are_ignored() {
    use RowKind::*;
    let clock = weir_state::ManualClock::new(1_000);
    let backend = Backend::with_clock("ttl", Arc::new(clock.clone()));
    let mut op = prepare_with(true, DEFAULT_BUFFER_BYTES, Some(1_000))
        .create(&ctx(&backend))
        .expect("creates");
    let mut changes = run(op.as_mut(), &[batch(&[("a", Some(3))], Some(&[Insert]))]);
    clock.advance(600);
    changes.extend(run(
        op.as_mut(),
        &[batch(&[("a", Some(5))], Some(&[Insert]))],
    ));
    // Read and written 600 ms ago: alive. 1,100 ms later it has expired.
    clock.advance(1_100);
    changes.extend(run(
        op.as_mut(),
        &[
            batch(&[("a", Some(3))], Some(&[Delete])),
            batch(&[("a", Some(7))], Some(&[Insert])),
        ],
    ));
    assert_eq!(
        changes,
        [
            "+I a 1 3 3 3 3.0 1",
            "-U a 1 3 3 3 3.0 1",
            "+U a 2 8 3 5 4.0 2",
            "+I a 1 7 7 7 7.0 1",
        ]
    );
}
