//! Computed source columns: SQL expressions over a source's columns, appended to every batch the
//! source reads, right after the read and before the source's watermarks are generated (so a
//! watermark may use one). `ts AS to_timestamp_millis(date_time)` in a SQL DDL.
//!
//! The columns are planned once, at prepare, in order: each one against the connector's schema
//! plus the computed columns before it. The prepared source is wrapped so that its schema (the
//! one every downstream node sees) is the connector's columns followed by the computed ones, and
//! so that each reader evaluates the expressions, vectorized, on every batch.

use super::expr::{ExprCompiler, datafusion_message, expression_error};
use crate::mapped_source::{BatchMap, mapped};
use arrow::array::ArrayRef;
use arrow::datatypes::{Field, Schema, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::physical_expr::PhysicalExpr;
use std::sync::Arc;
use weir_api::{Error, OperatorId, PreparedSource, Result};
use weir_plan::ComputedColumn;

/// Plans `columns` of the source `operator_id`, written at `origin` (`sources[0]`), against
/// `source`'s schema, and wraps `source` so that its batches carry them. Without columns the
/// source is returned as it is.
///
/// # Errors
/// The JSON path of the offending field and the error: a name that is already a column
/// (`<origin>.computed[j].name`), or an expression that does not plan, has an `AS` alias
/// (`<origin>.computed[j].expression`).
pub fn with_computed_columns(
    source: Arc<dyn PreparedSource>,
    columns: &[ComputedColumn],
    origin: &str,
    operator_id: &OperatorId,
    compiler: &ExprCompiler,
) -> std::result::Result<Arc<dyn PreparedSource>, (String, Error)> {
    if columns.is_empty() {
        return Ok(source);
    }
    let columns = plan(source.schema(), columns, origin, operator_id, compiler)?;
    Ok(mapped(source, columns))
}

/// Plans `columns` in order over `schema`; errors as [`with_computed_columns`].
fn plan(
    mut schema: SchemaRef,
    columns: &[ComputedColumn],
    origin: &str,
    operator_id: &OperatorId,
    compiler: &ExprCompiler,
) -> std::result::Result<ComputedColumns, (String, Error)> {
    let mut steps = Vec::with_capacity(columns.len());
    for (j, column) in columns.iter().enumerate() {
        if schema.field_with_name(&column.name).is_ok() {
            let path = format!("{origin}.computed[{j}].name");
            let message = format!(
                "`{}` is already a column of `{operator_id}` (columns: {}); give the computed \
                 column another name",
                column.name,
                describe_columns(&schema)
            );
            return Err((path.clone(), Error::config(path, message)));
        }
        let path = format!("{origin}.computed[{j}].expression");
        let text = &column.expression;
        let fail = |message: String| (path.clone(), expression_error(&path, text, message));
        let compiled = compiler
            .compile(text, &schema)
            .map_err(|e| fail(datafusion_message(&e)))?;
        if compiled.has_alias {
            return Err(fail(format!(
                "a computed column is named by its `name` (`{}`); remove the `AS` alias",
                column.name
            )));
        }
        let field = Field::clone(&compiled.field).with_name(&column.name);
        steps.push(Step {
            input: Arc::clone(&schema),
            expr: compiled.physical,
            path: path.clone(),
            text: text.clone(),
            name: column.name.clone(),
        });
        let mut fields = schema.fields().to_vec();
        fields.push(Arc::new(field));
        schema = Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()));
    }
    Ok(ComputedColumns {
        steps,
        output: schema,
    })
}

/// `a Int64, b Utf8`, for messages.
fn describe_columns(schema: &Schema) -> String {
    schema
        .fields()
        .iter()
        .map(|f| format!("{} {}", f.name(), f.data_type()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One planned computed column.
#[derive(Debug)]
struct Step {
    /// The schema the expression was planned against: the connector's columns and the computed
    /// columns before this one.
    input: SchemaRef,
    expr: Arc<dyn PhysicalExpr>,
    /// `sources[i].computed[j].expression`, for errors.
    path: String,
    text: String,
    name: String,
}

/// Every computed column of one source, shared by its readers.
#[derive(Debug)]
struct ComputedColumns {
    steps: Vec<Step>,
    /// The connector's columns followed by the computed ones.
    output: SchemaRef,
}

impl ComputedColumns {
    /// `batch` (the connector's columns) with every computed column appended, in order.
    fn append(&self, batch: RecordBatch) -> Result<RecordBatch> {
        let rows = batch.num_rows();
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
        let mut current = batch;
        for (j, step) in self.steps.iter().enumerate() {
            let fail = |message: String| {
                expression_error(
                    &step.path,
                    &step.text,
                    format!("evaluation failed: {message}"),
                )
            };
            let value = step
                .expr
                .evaluate(&current)
                .and_then(|v| v.into_array(rows))
                .map_err(|e| fail(datafusion_message(&e)))?;
            columns.push(value);
            let schema = match self.steps.get(j + 1) {
                Some(next) => Arc::clone(&next.input),
                None => Arc::clone(&self.output),
            };
            // Checks what the plan promised: the connector's batch has the declared columns,
            // and the value has the planned type, length and nullability.
            current = RecordBatch::try_new_with_options(schema, columns.clone(), &options)
                .map_err(|e| fail(e.to_string()))?;
        }
        Ok(current)
    }
}

impl BatchMap for ComputedColumns {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.output)
    }

    fn describe(&self) -> String {
        let computed: Vec<String> = self
            .steps
            .iter()
            .map(|s| format!("{} AS {}", s.name, s.text.trim()))
            .collect();
        format!("computed: {}", computed.join(", "))
    }

    fn apply(&self, batch: RecordBatch) -> Result<RecordBatch> {
        self.append(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray, Int64Array};
    use arrow::datatypes::{DataType, TimeUnit, TimestampMillisecondType};

    fn prepare(columns: &[(&str, &str)]) -> std::result::Result<ComputedColumns, String> {
        let columns: Vec<ComputedColumn> = columns
            .iter()
            .map(|(n, e)| ComputedColumn::new(n, e))
            .collect();
        let schema = Arc::new(Schema::new(vec![Field::new(
            "date_time",
            DataType::Int64,
            true,
        )]));
        plan(
            schema,
            &columns,
            "sources[0]",
            &OperatorId::new("bids"),
            &ExprCompiler::default(),
        )
        .map_err(|(path, e)| format!("{path}: {e}"))
    }

    #[test]
    fn columns_are_appended_in_order_and_may_use_earlier_ones() {
        let computed = prepare(&[
            ("ts", "to_timestamp_millis(date_time)"),
            ("next", "ts + INTERVAL '1' SECOND"),
        ])
        .expect("plans");
        assert_eq!(
            computed.output.field(1).data_type(),
            &DataType::Timestamp(TimeUnit::Millisecond, None)
        );
        let batch = RecordBatch::try_new(
            computed.steps[0].input.clone(),
            vec![Arc::new(Int64Array::from(vec![
                Some(1_000),
                None,
                Some(2_500),
            ]))],
        )
        .expect("batch");
        let out = computed.append(batch).expect("applies");
        assert_eq!(out.num_columns(), 3);
        let next = out.column(2).as_primitive::<TimestampMillisecondType>();
        assert_eq!(next.value(0), 2_000);
        assert!(next.is_null(1));
        assert_eq!(next.value(2), 3_500);
    }

    #[test]
    fn errors_name_the_field() {
        let err = prepare(&[("date_time", "1")]).expect_err("clash");
        assert!(
            err.starts_with("sources[0].computed[0].name: ")
                && err.contains("`date_time` is already a column of `bids`"),
            "{err}"
        );
        let err = prepare(&[("ts", "1"), ("b", "nope + 1")]).expect_err("unknown column");
        assert!(
            err.starts_with("sources[0].computed[1].expression: ") && err.contains("`nope + 1`"),
            "{err}"
        );
        let err = prepare(&[("b", "later"), ("later", "1")]).expect_err("forward reference");
        assert!(err.contains("computed[0].expression"), "{err}");
        let err = prepare(&[("b", "date_time AS c")]).expect_err("alias");
        assert!(err.contains("remove the `AS` alias"), "{err}");
        let err = prepare(&[("b", "sum(date_time)")]).expect_err("aggregate");
        assert!(err.contains("aggregate function"), "{err}");
    }
}
