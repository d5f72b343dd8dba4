//! The `filter` operator: keeps the rows for which a SQL predicate is true.

use super::expr::{
    ExprCompiler, SharedSession, datafusion_message, expression_error, single_input,
};
use arrow::array::{Array, AsArray, BooleanArray};
use arrow::compute::filter_record_batch;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;
use datafusion::execution::SessionState;
use datafusion::logical_expr::ColumnarValue;
use datafusion::physical_expr::PhysicalExpr;
use serde::Deserialize;
use std::sync::Arc;
use weir_api::{
    Error, Operator, OperatorArgs, OperatorFactory, Output, PreparedOperator, Result, TaskContext,
    WatermarkMarks, decode_options,
};

/// Options of a `filter` node.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FilterOptions {
    /// A boolean SQL expression over the input columns, e.g. `price > 1000 AND bidder <> 'x'`.
    predicate: String,
}

/// Creates `filter` operators: `{ "predicate": "<boolean SQL expression>" }`.
///
/// A row is kept when the predicate is true; false and NULL drop it (SQL `WHERE` semantics).
/// The output schema is the input schema. The predicate is planned once by DataFusion (with its
/// full function registry: `upper`, `abs`, `CASE`, `CAST`, date functions, ...) and evaluated on
/// whole batches.
#[derive(Debug, Default)]
pub struct FilterFactory {
    compiler: ExprCompiler,
}

impl FilterFactory {
    /// A factory planning with a default DataFusion session (built on first use).
    pub fn new() -> Self {
        Self::default()
    }

    /// A factory planning with `state`: its dialect, config and registered functions (UDFs).
    pub fn with_session_state(state: SessionState) -> Self {
        Self {
            compiler: ExprCompiler::with_state(state),
        }
    }

    /// A factory planning with a session shared with its registry, so that it sees the scalar
    /// functions registered there, before or after it was created.
    pub fn shared(session: SharedSession) -> Self {
        Self {
            compiler: ExprCompiler::shared(session),
        }
    }
}

impl OperatorFactory for FilterFactory {
    fn prepare(&self, spec: &OperatorArgs<'_>) -> Result<Arc<dyn PreparedOperator>> {
        let options: FilterOptions = decode_options(spec.options, spec.options_path)?;
        let input = single_input("filter", spec.operator_id, spec.input_schemas)?;
        let path = format!("{}.predicate", spec.options_path);
        let text = options.predicate;
        let predicate = self.compiler.predicate(&text, &input, &path)?;
        Ok(Arc::new(PreparedFilter {
            input,
            predicate,
            path,
            text,
        }))
    }
}

/// A filter planned against its input schema; shared by all subtasks.
#[derive(Debug)]
struct PreparedFilter {
    input: SchemaRef,
    predicate: Arc<dyn PhysicalExpr>,
    path: String,
    text: String,
}

impl PreparedOperator for PreparedFilter {
    fn output_schema(&self) -> SchemaRef {
        Arc::clone(&self.input)
    }

    fn describe(&self) -> String {
        format!("filter: {}", self.text.trim())
    }

    fn accepts_changes(&self) -> bool {
        true
    }

    fn reads_event_time(&self) -> bool {
        false
    }

    fn create(&self, _ctx: &TaskContext) -> Result<Box<dyn Operator>> {
        Ok(Box::new(FilterOperator {
            predicate: Arc::clone(&self.predicate),
            path: self.path.clone(),
            text: self.text.clone(),
        }))
    }
}

/// One subtask's filter: evaluates the planned predicate on each batch.
struct FilterOperator {
    predicate: Arc<dyn PhysicalExpr>,
    path: String,
    text: String,
}

/// What a filter keeps of a batch.
enum Kept {
    /// Every row: the batch itself.
    All(RecordBatch),
    /// No row.
    None,
    /// The rows the mask selects (valid trues), gathered.
    Some(RecordBatch, BooleanArray),
}

impl FilterOperator {
    /// Evaluates the predicate over `batch` and keeps the rows for which it is true.
    fn keep(&self, batch: RecordBatch) -> Result<Kept> {
        let value = self.predicate.evaluate(&batch).map_err(|e| {
            expression_error(
                &self.path,
                &self.text,
                format!("evaluation failed: {}", datafusion_message(&e)),
            )
        })?;
        match value {
            ColumnarValue::Scalar(ScalarValue::Boolean(Some(true))) => Ok(Kept::All(batch)),
            // A constant false or NULL keeps nothing.
            ColumnarValue::Scalar(_) => Ok(Kept::None),
            ColumnarValue::Array(mask) => {
                let mask = mask.as_boolean_opt().ok_or_else(|| {
                    Error::Internal(format!(
                        "filter predicate `{}` returned {} instead of Boolean",
                        self.text,
                        mask.data_type()
                    ))
                })?;
                // `true_count` counts only valid trues, so a NULL result drops its row.
                if mask.true_count() == batch.num_rows() {
                    Ok(Kept::All(batch))
                } else {
                    let kept = filter_record_batch(&batch, mask)
                        .map_err(|e| Error::arrow("filtering a batch", e))?;
                    Ok(Kept::Some(kept, mask.clone()))
                }
            }
        }
    }
}

impl Operator for FilterOperator {
    fn process_batch(&mut self, _input: usize, batch: RecordBatch, out: &mut Output) -> Result<()> {
        match self.keep(batch)? {
            Kept::All(batch) | Kept::Some(batch, _) => out.emit(batch),
            Kept::None => {}
        }
        Ok(())
    }

    /// The kept rows go on as one batch, each advance of the watermark before the first kept
    /// row at or after the row it was before.
    fn process_marked_batch(
        &mut self,
        _input: usize,
        batch: RecordBatch,
        marks: &WatermarkMarks,
        out: &mut Output,
    ) -> Result<()> {
        let empty = batch.slice(0, 0);
        match self.keep(batch)? {
            Kept::All(batch) => out.emit_marked(batch, marks.clone()),
            Kept::None => out.emit_marked(empty, marks.clone()),
            Kept::Some(kept, mask) => {
                // Kept rows before each mark, counted between consecutive marks.
                let (mut counted, mut kept_before) = (0, 0);
                let marks = marks.remap(|row| {
                    let row = row.clamp(counted, mask.len());
                    kept_before += mask.slice(counted, row - counted).true_count();
                    counted = row;
                    kept_before
                });
                out.emit_marked(kept, marks);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, Float64Array, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use weir_api::{Emitted, JobId, OperatorId, SubtaskIndex};

    fn input() -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("auction", DataType::Int64, false),
            Field::new("price", DataType::Int64, true),
            Field::new("bidder", DataType::Utf8, true),
            Field::new("rate", DataType::Float64, true),
        ]));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(vec![1, 2, 3, 4, 5])),
            Arc::new(Int64Array::from(vec![
                Some(500),
                Some(1500),
                None,
                Some(2000),
                Some(3000),
            ])),
            Arc::new(StringArray::from(vec![
                Some("alice"),
                Some("bob"),
                Some("carol"),
                Some("x"),
                None,
            ])),
            Arc::new(Float64Array::from(vec![
                Some(0.5),
                Some(1.5),
                None,
                Some(-0.0),
                Some(f64::NAN),
            ])),
        ];
        RecordBatch::try_new(schema, columns).expect("valid batch")
    }

    fn prepare(predicate: serde_json::Value) -> Result<Arc<dyn PreparedOperator>> {
        let id = OperatorId::new("f");
        let options = serde_json::json!({ "predicate": predicate });
        FilterFactory::new().prepare(&OperatorArgs {
            operator_id: &id,
            options: &options,
            options_path: "operators[1].options",
            input_schemas: &[input().schema()],
        })
    }

    /// Runs `predicate` over the test batch and returns the kept `auction` ids.
    fn kept(predicate: &str) -> Vec<i64> {
        let prepared = prepare(predicate.into()).expect("prepares");
        assert_eq!(prepared.output_schema(), input().schema());
        let ctx = TaskContext::new(JobId::new("j"), OperatorId::new("f"), SubtaskIndex(0), 1);
        let mut op = prepared.create(&ctx).expect("creates");
        let mut out = Output::new();
        op.process_batch(0, input(), &mut out).expect("filters");
        let mut ids = Vec::new();
        for emitted in out.drain() {
            let Emitted::Data { port: 0, batch } = emitted else {
                panic!("unexpected emission");
            };
            assert_eq!(batch.schema(), input().schema());
            ids.extend(
                batch
                    .column(0)
                    .as_primitive::<arrow::datatypes::Int64Type>()
                    .values(),
            );
        }
        ids
    }

    #[test]
    fn marks_move_to_the_kept_rows_before_them() {
        let prepared = prepare("price > 1000".into()).expect("prepares");
        let ctx = TaskContext::new(JobId::new("j"), OperatorId::new("f"), SubtaskIndex(0), 1);
        let mut op = prepared.create(&ctx).expect("creates");
        let at = |t| weir_api::Watermark(weir_api::EventTimeMs(t));
        // Rows 1, 3 and 4 (auctions 2, 4, 5) are kept.
        let mut marks = WatermarkMarks::new();
        for (row, w) in [(1, 10), (2, 20), (3, 30), (5, 50)] {
            marks.push(row, at(w));
        }
        let mut out = Output::new();
        op.process_marked_batch(0, input(), &marks, &mut out)
            .expect("filters");
        let emitted: Vec<Emitted> = out.drain().collect();
        let [Emitted::MarkedData { batch, marks }] = emitted.as_slice() else {
            panic!("one batch with marks: {emitted:?}");
        };
        assert_eq!(batch.num_rows(), 3);
        let got: Vec<(usize, i64)> = marks.iter().map(|(r, w)| (r, w.0.0)).collect();
        assert_eq!(got, [(0, 10), (1, 30), (3, 50)]);

        // Nothing kept: only the last watermark goes on.
        let prepared = prepare("price > 99999".into()).expect("prepares");
        let mut op = prepared.create(&ctx).expect("creates");
        op.process_marked_batch(0, input(), &marks_of(&[(2, 60)]), &mut out)
            .expect("filters");
        let emitted: Vec<Emitted> = out.drain().collect();
        assert!(matches!(emitted.as_slice(), [Emitted::Watermark(w)] if *w == at(60)));
    }

    fn marks_of(marks: &[(usize, i64)]) -> WatermarkMarks {
        let mut out = WatermarkMarks::new();
        for &(row, w) in marks {
            out.push(row, weir_api::Watermark(weir_api::EventTimeMs(w)));
        }
        out
    }

    #[test]
    fn keeps_true_rows_and_drops_null_results() {
        assert_eq!(kept("price > 1000 AND bidder <> 'x'"), [2]);
        // Row 3 (NULL price) is dropped by `price > 1000` and by `NOT (price > 1000)` alike.
        assert_eq!(kept("price > 1000"), [2, 4, 5]);
        assert_eq!(kept("NOT (price > 1000)"), [1]);
        assert_eq!(kept("price IS NULL OR bidder IS NULL"), [3, 5]);
    }

    #[test]
    fn uses_scalar_functions_case_and_floats() {
        assert_eq!(kept("upper(bidder) = 'BOB'"), [2]);
        assert_eq!(
            kept("CASE WHEN price > 1800 THEN true ELSE false END"),
            [4, 5]
        );
        assert_eq!(kept("abs(rate) = 0.0"), [4]);
        assert_eq!(kept("CAST(price AS VARCHAR) LIKE '1%'"), [2]);
        assert_eq!(kept("coalesce(price, 0) < 1000"), [1, 3]);
        assert_eq!(kept("length(concat(bidder, '!')) = 4"), [2]);
    }

    #[test]
    fn date_functions_and_now() {
        assert_eq!(
            kept("now() > to_timestamp_millis(auction)"),
            [1, 2, 3, 4, 5]
        );
        assert_eq!(
            kept("date_part('year', to_timestamp_seconds(auction * 31536000)) = 1971"),
            [1]
        );
    }

    #[test]
    fn constant_predicates() {
        assert_eq!(kept("true"), [1, 2, 3, 4, 5]);
        assert_eq!(kept("1 = 2"), Vec::<i64>::new());
    }

    #[test]
    fn describes_itself() {
        let prepared = prepare("price > 1000".into()).expect("prepares");
        assert_eq!(prepared.describe(), "filter: price > 1000");
    }

    fn error(predicate: &str) -> (String, String, String) {
        match prepare(predicate.into()).expect_err("invalid predicate") {
            Error::Expression {
                path,
                expression,
                message,
            } => (path, expression, message),
            other => panic!("expected an expression error, got {other}"),
        }
    }

    #[test]
    fn errors_name_the_option_and_the_expression() {
        let (path, expression, message) = error("nope > 1");
        assert_eq!(path, "operators[1].options.predicate");
        assert_eq!(expression, "nope > 1");
        assert!(message.contains("nope"), "{message}");

        let (_, _, message) = error("price + 1");
        assert!(message.contains("must be boolean"), "{message}");
        assert!(message.contains("Int64"), "{message}");

        let (_, expression, message) = error("price > > 1");
        assert_eq!(expression, "price > > 1");
        assert!(
            message.contains("Column"),
            "parse errors carry a position: {message}"
        );

        let (_, _, message) = error("price > 1 AS big");
        assert!(message.contains("alias"), "{message}");

        let (_, _, message) = error("no_such_function(price)");
        assert!(message.contains("no_such_function"), "{message}");

        let (_, _, message) = error("sum(price) > 1");
        assert!(
            message.contains("`sum(price)` is an aggregate function"),
            "{message}"
        );

        let err = prepare(serde_json::json!(42)).expect_err("not a string");
        assert!(
            matches!(&err, Error::Config { path, .. } if path == "operators[1].options.predicate"),
            "{err}"
        );
    }
}
