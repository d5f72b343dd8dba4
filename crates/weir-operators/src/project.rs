//! The `project` operator: computes output columns from SQL expressions over each row.

use super::expr::{
    ExprCompiler, SharedSession, datafusion_message, expression_error, single_input,
};
use arrow::array::ArrayRef;
use arrow::datatypes::{Schema, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::execution::SessionState;
use datafusion::physical_expr::PhysicalExpr;
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::Arc;
use weir_api::{
    Error, Operator, OperatorArgs, OperatorFactory, Output, PreparedOperator, Result, TaskContext,
    WatermarkMarks, decode_options,
};

/// Options of a `project` node.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProjectOptions {
    /// SQL expressions, each with an optional `AS alias`, e.g. `price * 0.908 AS euro`.
    expressions: Vec<String>,
}

/// Creates `project` operators: `{ "expressions": ["auction", "price * 0.908 AS euro"] }`.
///
/// Each expression gives one output column, in order, named by its alias, by the column for a
/// plain column reference, or else by DataFusion's display name (`price * Float64(0.908)`).
/// Types and nullability are the expressions' own (a Float64 stays Float64). Names must be
/// unique. Expressions are planned once by DataFusion and evaluated on whole batches.
#[derive(Debug, Default)]
pub struct ProjectFactory {
    compiler: ExprCompiler,
}

impl ProjectFactory {
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

impl OperatorFactory for ProjectFactory {
    fn prepare(&self, spec: &OperatorArgs<'_>) -> Result<Arc<dyn PreparedOperator>> {
        let options: ProjectOptions = decode_options(spec.options, spec.options_path)?;
        let input = single_input("project", spec.operator_id, spec.input_schemas)?;
        if options.expressions.is_empty() {
            return Err(Error::config(
                format!("{}.expressions", spec.options_path),
                "a projection needs at least one expression",
            ));
        }
        let mut exprs = Vec::with_capacity(options.expressions.len());
        let mut fields = Vec::with_capacity(options.expressions.len());
        let mut paths = Vec::with_capacity(options.expressions.len());
        let mut first_with_name: HashMap<String, usize> = HashMap::new();
        for (i, text) in options.expressions.iter().enumerate() {
            let path = format!("{}.expressions[{i}]", spec.options_path);
            let compiled = self
                .compiler
                .compile(text, &input)
                .map_err(|e| expression_error(&path, text, datafusion_message(&e)))?;
            let name = compiled.field.name();
            if let Some(first) = first_with_name.insert(name.clone(), i) {
                return Err(expression_error(
                    &path,
                    text,
                    format!(
                        "output column `{name}` is also produced by expressions[{first}]; \
                         rename one with `AS <name>`"
                    ),
                ));
            }
            exprs.push(compiled.physical);
            fields.push(compiled.field);
            paths.push(path);
        }
        // An updating stream's row kinds pass through, whether an expression names them or not.
        let carry = weir_api::changelog::row_kind_index(&input)
            .filter(|_| !first_with_name.contains_key(weir_api::ROW_KIND_COLUMN));
        if carry.is_some() {
            fields.push(Arc::new(weir_api::changelog::row_kind_field()));
        }
        let output = Arc::new(Schema::new_with_metadata(fields, input.metadata().clone()));
        Ok(Arc::new(PreparedProject {
            output,
            carry,
            exprs: exprs.into(),
            texts: options.expressions.into(),
            paths: paths.into(),
        }))
    }
}

/// A projection planned against its input schema; shared by all subtasks.
#[derive(Debug)]
struct PreparedProject {
    output: SchemaRef,
    /// The input's row kind column, appended to the output unchanged (an updating stream).
    carry: Option<usize>,
    exprs: Arc<[Arc<dyn PhysicalExpr>]>,
    texts: Arc<[String]>,
    paths: Arc<[String]>,
}

impl PreparedOperator for PreparedProject {
    fn output_schema(&self) -> SchemaRef {
        Arc::clone(&self.output)
    }

    fn describe(&self) -> String {
        let items: Vec<&str> = self.texts.iter().map(|t| t.trim()).collect();
        format!("project: {}", items.join(", "))
    }

    fn accepts_changes(&self) -> bool {
        true
    }

    fn reads_event_time(&self) -> bool {
        false
    }

    fn create(&self, _ctx: &TaskContext) -> Result<Box<dyn Operator>> {
        Ok(Box::new(ProjectOperator {
            output: Arc::clone(&self.output),
            carry: self.carry,
            exprs: Arc::clone(&self.exprs),
            texts: Arc::clone(&self.texts),
            paths: Arc::clone(&self.paths),
        }))
    }
}

/// One subtask's projection: evaluates the planned expressions on each batch.
struct ProjectOperator {
    output: SchemaRef,
    carry: Option<usize>,
    exprs: Arc<[Arc<dyn PhysicalExpr>]>,
    texts: Arc<[String]>,
    paths: Arc<[String]>,
}

impl Operator for ProjectOperator {
    fn process_batch(&mut self, _input: usize, batch: RecordBatch, out: &mut Output) -> Result<()> {
        out.emit(self.project(&batch)?);
        Ok(())
    }

    /// One output row per input row: the marks stay where they are.
    fn process_marked_batch(
        &mut self,
        _input: usize,
        batch: RecordBatch,
        marks: &WatermarkMarks,
        out: &mut Output,
    ) -> Result<()> {
        out.emit_marked(self.project(&batch)?, marks.clone());
        Ok(())
    }
}

impl ProjectOperator {
    /// The output columns computed over `batch`.
    fn project(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        let rows = batch.num_rows();
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.exprs.len());
        for (i, expr) in self.exprs.iter().enumerate() {
            let column = expr
                .evaluate(batch)
                .and_then(|value| value.into_array(rows))
                .map_err(|e| {
                    expression_error(
                        &self.paths[i],
                        &self.texts[i],
                        format!("evaluation failed: {}", datafusion_message(&e)),
                    )
                })?;
            let declared = self.output.field(i).data_type();
            if column.data_type() != declared {
                return Err(Error::Internal(format!(
                    "projection `{}` returned {} but was planned as {declared}",
                    self.texts[i],
                    column.data_type()
                )));
            }
            columns.push(column);
        }
        if let Some(kinds) = self.carry {
            columns.push(Arc::clone(batch.column(kinds)));
        }
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        RecordBatch::try_new_with_options(Arc::clone(&self.output), columns, &options)
            .map_err(|e| Error::arrow("assembling a projected batch", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray, Float64Array, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Float64Type, Int64Type};
    use weir_api::{Emitted, JobId, OperatorId, SubtaskIndex};

    fn input() -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("auction", DataType::Int64, false),
            Field::new("price", DataType::Float64, true),
            Field::new("bidder", DataType::Utf8, true),
        ]));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(vec![1, 2, 3])),
            Arc::new(Float64Array::from(vec![Some(1000.0), None, Some(0.5)])),
            Arc::new(StringArray::from(vec![Some("alice"), Some("Bob"), None])),
        ];
        RecordBatch::try_new(schema, columns).expect("valid batch")
    }

    fn prepare(expressions: &[&str]) -> Result<Arc<dyn PreparedOperator>> {
        let id = OperatorId::new("p");
        let options = serde_json::json!({ "expressions": expressions });
        ProjectFactory::new().prepare(&OperatorArgs {
            operator_id: &id,
            options: &options,
            options_path: "operators[2].options",
            input_schemas: &[input().schema()],
        })
    }

    fn test_ctx() -> TaskContext {
        TaskContext::new(JobId::new("j"), OperatorId::new("p"), SubtaskIndex(0), 1)
    }

    fn run(expressions: &[&str]) -> RecordBatch {
        let prepared = prepare(expressions).expect("prepares");
        let ctx = test_ctx();
        let mut op = prepared.create(&ctx).expect("creates");
        let mut out = Output::new();
        op.process_batch(0, input(), &mut out).expect("projects");
        let mut batches: Vec<RecordBatch> = out
            .drain()
            .map(|e| match e {
                Emitted::Data { port: 0, batch } => batch,
                other => panic!("unexpected emission {other:?}"),
            })
            .collect();
        assert_eq!(batches.len(), 1);
        let batch = batches.remove(0);
        assert_eq!(batch.schema(), prepared.output_schema());
        batch
    }

    #[test]
    fn row_kinds_pass_through_a_projection_that_does_not_name_them() {
        use arrow::array::Int8Array;
        let plain = input();
        let mut fields: Vec<_> = plain.schema().fields().iter().cloned().collect();
        fields.push(Arc::new(weir_api::changelog::row_kind_field()));
        let mut columns = plain.columns().to_vec();
        let kinds: ArrayRef = Arc::new(Int8Array::from(vec![2_i8; plain.num_rows()]));
        columns.push(Arc::clone(&kinds));
        let updating = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).expect("batch");
        let id = OperatorId::new("p");
        let options = serde_json::json!({ "expressions": ["auction + 1 AS next"] });
        let prepared = ProjectFactory::new()
            .prepare(&OperatorArgs {
                operator_id: &id,
                options: &options,
                options_path: "operators[0].options",
                input_schemas: &[updating.schema()],
            })
            .expect("prepares");
        let schema = prepared.output_schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["next", weir_api::ROW_KIND_COLUMN]);
        let mut op = prepared.create(&test_ctx()).expect("creates");
        let mut out = Output::new();
        op.process_batch(0, updating, &mut out).expect("projects");
        let Some(Emitted::Data { batch, .. }) = out.drain().next() else {
            panic!("no batch");
        };
        assert_eq!(batch.column(1), &kinds);
    }

    #[test]
    fn computes_columns_with_aliases_and_keeps_float64() {
        let batch = run(&["auction", "price * 0.908 AS euro", "upper(bidder) AS who"]);
        let schema = batch.schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["auction", "euro", "who"]);
        assert_eq!(schema.field(0).data_type(), &DataType::Int64);
        assert!(
            !schema.field(0).is_nullable(),
            "a non-null column stays non-null"
        );
        assert_eq!(schema.field(1).data_type(), &DataType::Float64);
        assert!(schema.field(1).is_nullable());
        let euro = batch.column(1).as_primitive::<Float64Type>();
        assert!((euro.value(0) - 908.0).abs() < 1e-9);
        assert!(euro.is_null(1));
        let who = batch.column(2).as_string::<i32>();
        assert_eq!(who.value(0), "ALICE");
        assert_eq!(who.value(1), "BOB");
        assert!(who.is_null(2));
    }

    #[test]
    fn names_unaliased_expressions_like_datafusion() {
        let batch = run(&[
            "auction + 1",
            "\"auction\" AS \"Id\"",
            "round(price) AS Rounded",
        ]);
        let schema = batch.schema();
        assert_eq!(schema.field(0).name(), "auction + Int64(1)");
        assert_eq!(
            schema.field(1).name(),
            "Id",
            "quoted aliases keep their case"
        );
        assert_eq!(
            schema.field(2).name(),
            "rounded",
            "bare aliases are normalized"
        );
        assert_eq!(
            batch.column(0).as_primitive::<Int64Type>().values(),
            &[2, 3, 4]
        );
    }

    #[test]
    fn case_cast_and_coalesce() {
        let batch = run(&[
            "CASE WHEN price > 100 THEN 'high' WHEN price IS NULL THEN 'none' ELSE 'low' END AS band",
            "CAST(auction AS DOUBLE) / 2 AS half",
            "coalesce(bidder, 'anon') AS name",
        ]);
        let band = batch.column(0);
        let band: Vec<String> = (0..3)
            .map(|i| arrow::util::display::array_value_to_string(band, i).expect("displayable"))
            .collect();
        assert_eq!(band, ["high", "none", "low"]);
        let half = batch.column(1).as_primitive::<Float64Type>();
        assert_eq!(half.values(), &[0.5, 1.0, 1.5]);
        let name =
            arrow::util::display::array_value_to_string(batch.column(2), 2).expect("displayable");
        assert_eq!(name, "anon");
    }

    #[test]
    fn evaluation_errors_name_the_item() {
        let prepared = prepare(&["auction", "auction / (auction - 1) AS ratio"]).expect("prepares");
        let ctx = test_ctx();
        let mut op = prepared.create(&ctx).expect("creates");
        let err = op
            .process_batch(0, input(), &mut Output::new())
            .expect_err("division by zero in row 1");
        let Error::Expression { path, message, .. } = &err else {
            panic!("expected an expression error, got {err}");
        };
        assert_eq!(path, "operators[2].options.expressions[1]");
        assert!(
            message.to_lowercase().contains("divide by zero"),
            "{message}"
        );
    }

    #[test]
    fn describes_itself() {
        let prepared = prepare(&["auction", " price * 0.908 AS euro "]).expect("prepares");
        assert_eq!(
            prepared.describe(),
            "project: auction, price * 0.908 AS euro"
        );
    }

    fn error(expressions: &[&str]) -> (String, String, String) {
        match prepare(expressions).expect_err("invalid projection") {
            Error::Expression {
                path,
                expression,
                message,
            } => (path, expression, message),
            other => panic!("expected an expression error, got {other}"),
        }
    }

    #[test]
    fn errors_name_the_item_and_the_expression() {
        let (path, expression, message) = error(&["auction", "nope * 2 AS x"]);
        assert_eq!(path, "operators[2].options.expressions[1]");
        assert_eq!(expression, "nope * 2 AS x");
        assert!(message.contains("nope"), "{message}");

        let (path, _, message) = error(&["auction", "price AS auction"]);
        assert_eq!(path, "operators[2].options.expressions[1]");
        assert!(message.contains("`auction`"), "{message}");
        assert!(message.contains("expressions[0]"), "{message}");

        let (path, _, message) = error(&["upper(bidder))", "auction"]);
        assert_eq!(path, "operators[2].options.expressions[0]");
        assert!(
            message.contains("Column"),
            "parse errors carry a position: {message}"
        );

        let (_, _, message) = error(&["bidder - 1"]);
        assert!(message.contains("Utf8"), "{message}");

        let err = prepare(&[]).expect_err("empty");
        assert!(
            matches!(&err, Error::Config { path, .. } if path == "operators[2].options.expressions"),
            "{err}"
        );
    }
}
